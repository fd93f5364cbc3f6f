//go:build !(mips || mipsle || mips64 || mips64le)

package early

// Landlock's system call numbers, the same on every architecture but
// MIPS's.
const (
	sysLandlockCreateRuleset = 444
	sysLandlockAddRule       = 445
	sysLandlockRestrictSelf  = 446
)

// supported says this package knows the system calls here.
const supported = true
