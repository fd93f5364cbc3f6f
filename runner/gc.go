package runner

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The engine's garbage collector. The pulumi CLI allocates about 60 MB in
// its package initializers before it reads a flag, and with Go's default
// GOGC=100 it collects eight times on the way, twelve times in an up of
// a small stack (GODEBUG=gctrace=1), against two with GOGC=400: 4 % of
// that up (measured on pulumi 3.250: 0.384 s against 0.368 s, 20
// interleaved runs). A higher GOGC for the engine, and the engine only,
// saves those collections; the engine's heap then peaks nearer five
// times its live data than twice, which on a small state is a few
// megabytes (+7 MB RSS with a 3.5 KB state) but grows with it (+50 MB
// at 473 KB, 200 resources). So the engine of a stack gets EngineGOGC
// only while the state the runner last read of it is at most smallState
// bytes; a stack not read yet since the daemon started, or larger, keeps
// Go's default. The plugins the engine starts (the program, the
// providers, whose memory follows their own needs, not the stack's
// size) never get it: their wrapper removes it (see ProgramAccess.Env),
// so it applies only where the engine's plugins run confined, and not
// with --allow-project-plugins, whose plugins start without the wrapper.
//
// The program decides how big the engine's heap grows in the operation
// (what it registers, invokes and logs), after the decision: the tuned
// engine also gets GOMEMLIMIT=512MiB, a soft limit under which the
// collector works harder, so that its heap never outgrows both what Go's
// default gives and 512 MiB. Sizes are kept per stackd name, backend and
// Pulumi stack, so that a name moved to another stack starts unknown.

// DefaultEngineGOGC is the GOGC of the engine of a small stack that
// stackd run gives by default (--pulumi-gogc).
const DefaultEngineGOGC = 400

// smallState is the largest state, in bytes of compact JSON, whose
// engine gets EngineGOGC.
const smallState = 256 << 10

// engineGOGC decides the GOGC of a stack's engine: gogc (the daemon's
// setting; 0 is none) when the stack's last read state of size bytes
// was small (known says it was read at all), its plugins run confined
// (their wrapper takes it away from them), and neither the operator nor
// the stack set GOGC or GOMEMLIMIT themselves. It returns 0 for Go's default.
func engineGOGC(gogc, size int, known, confined, set bool) int {
	if gogc <= 0 || !known || size > smallState || !confined || set {
		return 0
	}
	return gogc
}

// gogc is the GOGC of w's engine for the operation being opened.
func (r *Runner) gogc(w *workspace) int {
	size, known := r.stateSizes.Load(sizeKey(w))
	n, _ := size.(int)
	confined := r.wrapper != "" && !r.opts.ProjectPlugins
	return engineGOGC(r.opts.EngineGOGC, n, known, confined, r.gogcSet(w))
}

// gcVars are the variables of the engine's collector the runner sets.
var gcVars = []string{"GOGC", "GOMEMLIMIT"}

// gogcSet says whether the operator (--env-file, --pass-env of a
// variable the daemon has) or the stack (envRefs) sets GOGC or
// GOMEMLIMIT: theirs applies, to every process, as it would without this.
func (r *Runner) gogcSet(w *workspace) bool {
	for _, k := range gcVars {
		if _, ok := w.Env[k]; ok {
			return true
		}
		if slices.ContainsFunc(r.opts.Env, func(kv string) bool { return strings.HasPrefix(kv, k+"=") }) {
			return true
		}
		if _, inherited := os.LookupEnv(k); inherited && matchesAny(r.opts.PassEnv, k) {
			return true
		}
	}
	return false
}

// sizeKey keys w's state size: its name, backend and Pulumi stack.
func sizeKey(w *workspace) string { return w.Name + "\x00" + w.state + "\x00" + w.Stack }

// noteStateSize records the size of w's state just read, as compact
// JSON: data is compacted only when it is not already (compact false)
// and its length alone does not say it is small.
func (r *Runner) noteStateSize(w *workspace, data []byte, compact bool) {
	n := len(data)
	if !compact && n > smallState {
		var c bytes.Buffer
		if err := json.Compact(&c, data); err != nil {
			return
		}
		n = c.Len()
	}
	r.stateSizes.Store(sizeKey(w), n)
}

// gogcEnv is the engine's variables for a GOGC decided by gogc.
func gogcEnv(n int) []string {
	if n == 0 {
		return nil
	}
	return []string{"GOGC=" + strconv.Itoa(n), "GOMEMLIMIT=512MiB"}
}
