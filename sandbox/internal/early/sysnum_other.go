//go:build mips || mipsle || mips64 || mips64le

package early

// On MIPS, the sandbox package's initializer wraps plugins.
const (
	sysLandlockCreateRuleset = 0
	sysLandlockAddRule       = 0
	sysLandlockRestrictSelf  = 0
	supported                = false
)
