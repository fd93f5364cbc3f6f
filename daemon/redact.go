package daemon

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/stackd/stackd/daemon/notify"
	"github.com/stackd/stackd/daemon/scrub"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/model"
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
// the status in memory (putStack, viewLocked) and an operation's log.

// Redactor is the daemon's redactor: work outside the reconcile loop (a
// pull request's preview) cleans what it shows with it.
func (d *Daemon) Redactor() *scrub.Redactor { return d.red }

// learnConfig adds the secret values of cfg to the daemon's redactor.
// It reads Secret files: call it without d.mu held.
func (d *Daemon) learnConfig(cfg *spec.Config) {
	d.red.Add(configSecrets(cfg, d.opts.Refs)...)
}

// configSecrets are the secret values of cfg: the data of its Secret
// documents and, for each stack, its secret config, secretsRef (its
// review stacks' too), secret envRefs, envSecrets, accessTokenSecret and
// Git credentials. A reference
// that cannot be read is skipped (the stack's operation reports it);
// another stack's output is learned when an operation reads it.
func configSecrets(cfg *spec.Config, refs spec.RefSources) []string {
	refs.StackOutput = nil
	var out []string
	for _, name := range slices.Sorted(maps.Keys(cfg.Secrets)) {
		out = append(out, slices.Collect(maps.Values(cfg.Secrets[name]))...)
	}
	for _, s := range cfg.Stacks {
		out = append(out, stackSecrets(cfg, s, refs)...)
	}
	return out
}

func stackSecrets(cfg *spec.Config, s *spec.Stack, refs spec.RefSources) []string {
	sp := &s.Spec
	out := slices.Collect(maps.Values(sp.Secrets))
	resolve := func(path string, r spec.ResourceRef) {
		if r.Type == spec.RefStackOutput {
			return
		}
		if v, err := cfg.ResolveRef(s, path, r, refs); err == nil {
			out = append(out, v)
		}
	}
	for k, r := range sp.SecretsRef {
		resolve("secretsRef."+k, r)
	}
	if rs := sp.ReviewStacks; rs != nil {
		for k, r := range rs.SecretsRef {
			resolve("reviewStacks.secretsRef."+k, r)
		}
		for k, r := range rs.EnvRefs {
			if r.IsSecret(k) {
				resolve("reviewStacks.envRefs."+k, r)
			}
		}
	}
	for k, r := range sp.EnvRefs {
		if r.IsSecret(k) {
			resolve("envRefs."+k, r)
		}
	}
	for _, name := range sp.EnvSecrets {
		if data, err := cfg.SecretData(name, refs); err == nil {
			out = append(out, slices.Collect(maps.Values(data))...)
		}
	}
	if name := sp.AccessTokenSecret; name != "" {
		if v, err := cfg.SecretValue(name, "accessToken", refs); err == nil {
			out = append(out, v)
		}
	}
	if a, err := cfg.GitAuth(s, refs); err == nil && a != nil {
		out = append(out, a.Secrets()...)
	}
	return out
}

// scrubStatus returns s with every message and output cleaned by r, and
// whether that changed anything. It copies what it changes and leaves
// s's maps and slices alone.
func scrubStatus(s model.StackStatus, r *scrub.Redactor) (model.StackStatus, bool) {
	changed := false
	for i, c := range s.Conditions {
		if m := r.Clean(c.Message); m != c.Message {
			if !changed {
				s.Conditions, changed = slices.Clone(s.Conditions), true
			}
			s.Conditions[i].Message = m
		}
	}
	if outs, ok := scrubOutputs(s.Outputs, r); ok {
		s.Outputs, changed = outs, true
	}
	if lu := s.LastUpdate; lu != nil {
		if m := r.Clean(lu.Message); m != lu.Message {
			c := *lu
			c.Message, s.LastUpdate, changed = m, &c, true
		}
	}
	if h := s.Health; h != nil {
		if m := r.Clean(h.Message); m != h.Message {
			s.Health, changed = &model.Health{Status: h.Status, Message: m}, true
		}
	}
	if dr := s.Drift; dr != nil {
		if m := r.Clean(dr.Message); m != dr.Message {
			s.Drift, changed = dr.Clone(), true
			s.Drift.Message = m
		}
	}
	if sc := s.SkippedCommit; sc != nil {
		if m := r.Clean(sc.Reason); m != sc.Reason {
			c := *sc
			c.Reason, s.SkippedCommit, changed = m, &c, true
		}
	}
	if g, ok := scrubGate(s.Gate, r); ok {
		s.Gate, changed = g, true
	}
	return s, changed
}

// scrubGate returns g cleaned by r, every text and input value of it
// (a policy's message or a plain input may echo a secret), and whether
// that changed anything.
func scrubGate(g *model.Gate, r *scrub.Redactor) (*model.Gate, bool) {
	if g == nil {
		return nil, false
	}
	raw, err := json.Marshal(g)
	if err != nil {
		return g, false
	}
	clean := r.JSON(raw)
	if bytes.Equal(clean, raw) {
		return g, false
	}
	var c model.Gate
	if err := json.Unmarshal(clean, &c); err != nil {
		return &model.Gate{State: g.State, Reason: "[redacted]", Commit: g.Commit, Generation: g.Generation,
			ReconcileRequest: g.ReconcileRequest, Update: g.Update, Plan: g.Plan, Created: g.Created, Expires: g.Expires}, true
	}
	return &c, true
}

// scrubOutputs returns outs cleaned by r, names and JSON values, and
// whether that changed anything; outs itself when it did not.
func scrubOutputs(outs map[string]json.RawMessage, r *scrub.Redactor) (map[string]json.RawMessage, bool) {
	var clean map[string]json.RawMessage
	for _, k := range slices.Sorted(maps.Keys(outs)) {
		v := outs[k]
		cv, ck := r.JSON(v), r.Clean(k)
		if ck == k && bytes.Equal(cv, v) {
			continue
		}
		if clean == nil {
			clean = maps.Clone(outs)
		}
		delete(clean, k)
		clean[ck] = cv
	}
	if clean == nil {
		return outs, false
	}
	return clean, true
}

// scrubPlain returns a plain value (maps, slices and scalars, as
// spec.Plain makes them) with every string and key cleaned, in new maps
// and slices: a stack's spec view shows no other stack's secret either.
func scrubPlain(v any, r *scrub.Redactor) any {
	switch t := v.(type) {
	case string:
		return r.Clean(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[r.Clean(k)] = scrubPlain(e, r)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = scrubPlain(e, r)
		}
		return out
	}
	return v
}

// scrubUpdate returns u with its reason and message cleaned by r.
func scrubUpdate(u model.Update, r *scrub.Redactor) model.Update {
	u.Reason, u.Message = r.Clean(u.Reason), r.Clean(u.Message)
	return u
}

// scrubStore cleans every record written to its Store, and every record
// read from it: a record written by an older stackd, or before a secret
// was learned, is clean when served.
type scrubStore struct {
	Store
	r *scrub.Redactor
}

func (s scrubStore) PutStack(rec model.StackRecord) error {
	rec.Status, _ = scrubStatus(rec.Status, s.r)
	return s.Store.PutStack(rec)
}

func (s scrubStore) Stack(name string) (model.StackRecord, error) {
	rec, err := s.Store.Stack(name)
	rec.Status, _ = scrubStatus(rec.Status, s.r)
	return rec, err
}

func (s scrubStore) Stacks() ([]model.StackRecord, error) {
	recs, err := s.Store.Stacks()
	for i := range recs {
		recs[i].Status, _ = scrubStatus(recs[i].Status, s.r)
	}
	return recs, err
}

func (s scrubStore) BeginUpdate(u model.Update) (model.Update, error) {
	return s.Store.BeginUpdate(scrubUpdate(u, s.r))
}

func (s scrubStore) PutUpdate(u model.Update) error { return s.Store.PutUpdate(scrubUpdate(u, s.r)) }

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
		us[i] = scrubUpdate(us[i], s.r)
	}
	return us
}

func (s scrubStore) Update(id string) (model.Update, error) {
	u, err := s.Store.Update(id)
	return scrubUpdate(u, s.r), err
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

// scrubConfigStatus returns s with its errors and sources cleaned by r.
func scrubConfigStatus(s model.ConfigStatus, r *scrub.Redactor) model.ConfigStatus {
	s.Error = r.Clean(s.Error)
	if s.Health != nil {
		s.Health = &model.Health{Status: s.Health.Status, Message: r.Clean(s.Health.Message)}
	}
	s.Sources = slices.Clone(s.Sources)
	for i := range s.Sources {
		src := &s.Sources[i]
		src.Source, src.Error, src.Health.Message = r.Clean(src.Source), r.Clean(src.Error), r.Clean(src.Health.Message)
		if src.Git != nil {
			g := *src.Git
			g.URL, src.Git = r.Clean(g.URL), &g
		}
	}
	if s.Policies != nil {
		p := *s.Policies
		p.Source, p.Error, s.Policies = r.Clean(p.Source), r.Clean(p.Error), &p
	}
	return s
}

// scrubLocked cleans st's status in memory when secrets were learned
// since it was last cleaned, and records it when that changed it. Called
// with d.mu held.
func (d *Daemon) scrubLocked(st *stackState) {
	v := d.red.Version()
	if st.scrubbed == v {
		return
	}
	s, changed := scrubStatus(st.rec.Status, d.red)
	st.scrubbed = v
	if changed {
		st.rec.Status = s
		d.putStack(st)
	}
}
