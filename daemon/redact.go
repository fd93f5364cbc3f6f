package daemon

import (
	"github.com/stackd/stackd/daemon/notify"
	"github.com/stackd/stackd/daemon/scrub"
	"github.com/stackd/stackd/daemon/spec"
)

// The daemon scrubs every secret it knows from everything it stores,
// serves, logs and tells, whichever stack the secret belongs to: a
// program can print another stack's secret (a shared credential, a
// StackOutput reference, a leak), and the daemon's own tokens can end up
// in an error. One Redactor holds them all (Options.Redactor): the
// daemon's own secrets, given at start; every stack's secret config,
// secretsRef, secret envRefs and gitAuth, and the Secret documents of the
// config, learned whenever a config is read; what an operation resolves
// (other stacks' secret outputs), learned when it starts. Its choke
// points are the Store (every record written or read), the Notifier,
// the status in memory (putStack, view) and an operation's log.

// Redactor is the daemon's redactor: work outside the reconcile loop (a
// pull request's preview) cleans what it shows with it.
func (d *Daemon) Redactor() *scrub.Redactor { return d.red }

// learnConfig adds the secret values of cfg to the daemon's redactor.
// It reads Secret files: call it without d.mu held.
func (d *Daemon) learnConfig(cfg *spec.Config) {
	d.red.Add(spec.ConfigSecrets(cfg, d.opts.Refs)...)
}

// scrubStore is the Store, its records cleaned by the redactor
// (scrub.Store).
type scrubStore struct {
	scrub.Store
	storeRest
}

// scrubNotifier cleans every event's message before its Notifier sees
// it.
type scrubNotifier struct {
	Notifier
	r *scrub.Redactor
}

func (n scrubNotifier) Notify(e notify.Event) {
	e.Message = n.r.Clean(e.Message)
	if e.Drift != nil {
		e.Drift = e.Drift.Clone()
		e.Drift.Message = n.r.Clean(e.Drift.Message)
	}
	n.Notifier.Notify(e)
}

// cleanStatus cleans st's status in memory when secrets were learned
// since it was last cleaned, and records it when that changed it.
func (d locked) cleanStatus(st *stackState) {
	v := d.red.Version()
	if st.scrubbed == v {
		return
	}
	s, changed := scrub.Status(st.rec.Status, d.red)
	st.scrubbed = v
	if changed {
		st.rec.Status = s
		d.putStack(st)
	}
}
