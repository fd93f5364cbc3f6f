package scrub

import "github.com/stackd/stackd/daemon/model"

// Records is the part of the daemon's Store that holds what a program's
// output or an error can carry a secret into: stack records, updates,
// logs and config revisions.
type Records interface {
	PutStack(rec model.StackRecord) error
	// Stack reads one record; the error wraps the store's not-found error
	// when there is none.
	Stack(name string) (model.StackRecord, error)
	Stacks() ([]model.StackRecord, error)
	BeginUpdate(u model.Update) (model.Update, error)
	PutUpdate(u model.Update) error
	PutLog(id string, log []byte) error
	RunningUpdates() ([]model.Update, error)
	// Updates lists a stack's updates newest first, those with Seq below
	// before when before > 0, at most limit.
	Updates(stack string, before uint64, limit int) ([]model.Update, error)
	Update(id string) (model.Update, error)
	Log(id string) ([]byte, error)
	// PutRevision appends a config revision, assigning its Seq.
	PutRevision(r model.ConfigRevision) (model.ConfigRevision, error)
	// Revisions lists config revisions newest first, those with Seq below
	// before when before > 0, at most limit.
	Revisions(before uint64, limit int) ([]model.ConfigRevision, error)
}

// Store cleans with R every record written to its Records, and every
// record read from it: a record written by an older stackd, or before a
// secret was learned, is clean when served.
type Store struct {
	Records
	R *Redactor
}

func (s Store) PutStack(rec model.StackRecord) error {
	rec.Status, _ = Status(rec.Status, s.R)
	return s.Records.PutStack(rec)
}

func (s Store) Stack(name string) (model.StackRecord, error) {
	rec, err := s.Records.Stack(name)
	rec.Status, _ = Status(rec.Status, s.R)
	return rec, err
}

func (s Store) Stacks() ([]model.StackRecord, error) {
	recs, err := s.Records.Stacks()
	for i := range recs {
		recs[i].Status, _ = Status(recs[i].Status, s.R)
	}
	return recs, err
}

func (s Store) BeginUpdate(u model.Update) (model.Update, error) {
	return s.Records.BeginUpdate(Update(u, s.R))
}

func (s Store) PutUpdate(u model.Update) error { return s.Records.PutUpdate(Update(u, s.R)) }

func (s Store) PutLog(id string, log []byte) error { return s.Records.PutLog(id, s.R.Bytes(log)) }

func (s Store) RunningUpdates() ([]model.Update, error) {
	us, err := s.Records.RunningUpdates()
	return s.updates(us), err
}

func (s Store) Updates(stack string, before uint64, limit int) ([]model.Update, error) {
	us, err := s.Records.Updates(stack, before, limit)
	return s.updates(us), err
}

func (s Store) updates(us []model.Update) []model.Update {
	for i := range us {
		us[i] = Update(us[i], s.R)
	}
	return us
}

func (s Store) Update(id string) (model.Update, error) {
	u, err := s.Records.Update(id)
	return Update(u, s.R), err
}

func (s Store) Log(id string) ([]byte, error) {
	log, err := s.Records.Log(id)
	return s.R.Bytes(log), err
}

func (s Store) PutRevision(rev model.ConfigRevision) (model.ConfigRevision, error) {
	rev.Error = s.R.Clean(rev.Error)
	return s.Records.PutRevision(rev)
}

func (s Store) Revisions(before uint64, limit int) ([]model.ConfigRevision, error) {
	revs, err := s.Records.Revisions(before, limit)
	for i := range revs {
		revs[i].Error = s.R.Clean(revs[i].Error)
	}
	return revs, err
}
