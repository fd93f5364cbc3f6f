package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// Git resolves and checks out repositories; gitwatch's Fetcher satisfies
// it (see daemon.Fetcher for the contract). Its errors are free of
// credentials.
type Git interface {
	Resolve(ctx context.Context, src model.GitSource) (string, error)
	Checkout(ctx context.Context, src model.GitSource, commit, dir string) (string, error)
}

// Defaults of Options.
const (
	DefaultTimeout      = 2 * time.Minute
	DefaultMaxFiles     = 20000
	DefaultMaxFileBytes = 1 << 20
	DefaultMaxItems     = 100000
)

// Options configure an Expander. Only Git and Dir are needed to evaluate
// git generators; the rest have defaults.
type Options struct {
	Git Git
	// Dir is where the generators' checkouts live (<data-dir>/stacksets);
	// the Expander removes what it no longer uses there.
	Dir string
	// Timeout bounds one Expand (DefaultTimeout).
	Timeout time.Duration
	Logger  *slog.Logger
	// Offline evaluates no git generator: each yields nothing and its
	// status says it was not evaluated, for `stackd validate`.
	Offline bool
	Now     func() time.Time
	// Auth resolves a git generator's gitAuth; nil is RefAuth of empty
	// RefSources (literal, environment and file references only).
	Auth AuthFunc
	// HostPaths says which local repositories a set read from Git may
	// name, as for a stack's projectRepo.
	HostPaths spec.HostPaths
	// MaxFiles bounds the files one files generator reads
	// (DefaultMaxFiles), MaxFileBytes the size of each
	// (DefaultMaxFileBytes), and MaxItems the parameter sets one
	// generator yields, a matrix's product included (DefaultMaxItems).
	MaxFiles     int
	MaxFileBytes int64
	MaxItems     int
}

// Expander evaluates StackSets' generators. Use New; its methods are safe
// for concurrent use. Expand calls run one at a time, so that checkouts
// and the sweep of unused ones never race.
type Expander struct {
	opts Options
	log  *slog.Logger

	run sync.Mutex // held by Expand and Keep

	mu   sync.Mutex
	sets map[string]*setState // by set name
}

// setState is what the Expander keeps of one set between expansions.
type setState struct {
	defs   string           // hash of the generators' definitions
	good   []spec.Generated // the last good output; nil before one
	goodOK bool
	status []model.GeneratorStatus
	// watched are the git sources of the last expansion and the commit
	// each resolved to then ("" when it failed), for Changed.
	watched map[string]watched
	// checkouts are the checkout directories (names under Dir) the set
	// uses, kept from the sweep.
	checkouts map[string]bool
}

// New returns an Expander configured by opts, with defaults filled in.
func New(opts Options) *Expander {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxFiles <= 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	if opts.MaxItems <= 0 {
		opts.MaxItems = DefaultMaxItems
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Auth == nil {
		opts.Auth = RefAuth(spec.RefSources{})
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Expander{opts: opts, log: log, sets: map[string]*setState{}}
}

// Expand evaluates set's generators in order and concatenates their
// output; it is a spec.Expander as a method value. When a generator
// fails, the error is logged and shown in Status, and Expand returns the
// set's last good output if its generators' definitions are unchanged
// since; otherwise it returns the error. The Params of the result are
// shared with the Expander's memory: callers must not modify them.
func (x *Expander) Expand(set *spec.StackSet) ([]spec.Generated, error) {
	x.run.Lock()
	defer x.run.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), x.opts.Timeout)
	defer cancel()
	defs, err := defsHash(set.Spec.Generators)
	if err != nil {
		return nil, fmt.Errorf("stackset %s: %w", set.Name, err)
	}
	e := x.newEval(ctx, set)
	out, errs := e.all()
	prev := x.state(set.Name, defs)
	x.record(set.Name, prev, e, out, errs)
	if err := errors.Join(errs...); err != nil {
		x.log.Warn("fleet: a generator failed", "stackset", set.Name, "err", err, "keptLastGood", prev.goodOK)
		if prev.goodOK {
			return prev.good, nil
		}
		return nil, fmt.Errorf("stackset %s: %w", set.Name, err)
	}
	if !x.opts.Offline {
		x.sweep()
	}
	return out, nil
}

// state returns a copy of the set's state if its definitions are defs,
// else a fresh state.
func (x *Expander) state(name, defs string) setState {
	x.mu.Lock()
	defer x.mu.Unlock()
	if st := x.sets[name]; st != nil && st.defs == defs {
		return *st
	}
	return setState{defs: defs}
}

// record stores what an evaluation of set name yielded: on success its
// output becomes the last good one; on failure the last good one stays,
// and the status of each failed generator keeps its last success.
func (x *Expander) record(name string, prev setState, e *eval, out []spec.Generated, errs []error) {
	now := x.opts.Now()
	st := &setState{defs: prev.defs, good: prev.good, goodOK: prev.goodOK,
		watched: e.watched, checkouts: e.checkouts}
	failed := errors.Join(errs...) != nil
	if !failed && !x.opts.Offline {
		st.good, st.goodOK = out, true
	}
	if failed {
		// Keep the checkouts of the last good output too: the next
		// success is likely at one of them.
		st.checkouts = maps.Clone(e.checkouts)
		maps.Copy(st.checkouts, prev.checkouts)
	}
	st.status = e.statuses(prev.status, errs, now)
	x.mu.Lock()
	x.sets[name] = st
	x.mu.Unlock()
}

// Keep forgets every set not named in names: their last good output,
// status and checkouts. The daemon calls it after a config load with the
// sets the config holds.
func (x *Expander) Keep(names []string) {
	x.run.Lock()
	defer x.run.Unlock()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	x.mu.Lock()
	maps.DeleteFunc(x.sets, func(n string, _ *setState) bool { return !want[n] })
	x.mu.Unlock()
	if !x.opts.Offline {
		x.sweep()
	}
}

// defsHash identifies a set's generator definitions: a last good output
// is kept only for the definitions that produced it.
func defsHash(gens []spec.Generator) (string, error) {
	data, err := json.Marshal(gens)
	if err != nil {
		return "", fmt.Errorf("hash generators: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}
