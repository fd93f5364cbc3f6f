package daemon

import (
	"github.com/stackd/stackd/daemon/model"
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

// scrubStore cleans every record written to its Store, and every record
// read from it: a record written by an older stackd, or before a secret
// was learned, is clean when served.
type scrubStore struct {
	Store
	r *scrub.Redactor
}

func (s scrubStore) PutStack(rec model.StackRecord) error {
	rec.Status, _ = scrub.Status(rec.Status, s.r)
	return s.Store.PutStack(rec)
}

func (s scrubStore) Stack(name string) (model.StackRecord, error) {
	rec, err := s.Store.Stack(name)
	rec.Status, _ = scrub.Status(rec.Status, s.r)
	return rec, err
}

func (s scrubStore) Stacks() ([]model.StackRecord, error) {
	recs, err := s.Store.Stacks()
	for i := range recs {
		recs[i].Status, _ = scrub.Status(recs[i].Status, s.r)
	}
	return recs, err
}

func (s scrubStore) BeginUpdate(u model.Update) (model.Update, error) {
	return s.Store.BeginUpdate(scrub.Update(u, s.r))
}

func (s scrubStore) PutUpdate(u model.Update) error { return s.Store.PutUpdate(scrub.Update(u, s.r)) }

func (s scrubStore) PutLog(id string, log []byte) error { return s.Store.PutLog(id, s.r.Bytes(log)) }

func (s scrubStore) RunningUpdates() ([]model.Update, error) {
	us, err := s.Store.RunningUpdates()
	return s.updates(us), err
}

func (s scrubStore) Updates(stack string, before uint64, limit int) ([]model.Update, error) {
	us, err := s.Store.Updates(stack, before, limit)
	return s.updates(us), err
}

func (s scrubStore) updates(us []model.Update) []model.Update {
	for i := range us {
		us[i] = scrub.Update(us[i], s.r)
	}
	return us
}

func (s scrubStore) Update(id string) (model.Update, error) {
	u, err := s.Store.Update(id)
	return scrub.Update(u, s.r), err
}

func (s scrubStore) Log(id string) ([]byte, error) {
	log, err := s.Store.Log(id)
	return s.r.Bytes(log), err
}

func (s scrubStore) PutRevision(rev model.ConfigRevision) (model.ConfigRevision, error) {
	rev.Error = s.r.Clean(rev.Error)
	return s.Store.PutRevision(rev)
}

func (s scrubStore) Revisions(before uint64, limit int) ([]model.ConfigRevision, error) {
	revs, err := s.Store.Revisions(before, limit)
	for i := range revs {
		revs[i].Error = s.r.Clean(revs[i].Error)
	}
	return revs, err
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
