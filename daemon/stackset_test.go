package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// fakeRollouts holds the stacks named in hold and records what the loop
// asks and gives back.
type fakeRollouts struct {
	mu      sync.Mutex
	hold    map[string]bool
	members map[string][]model.RolloutMember // by stack, the last Admit's
	done    []string
}

func (f *fakeRollouts) Admit(set *spec.StackSet, name string, members []model.RolloutMember) (string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members[name] = slices.Clone(members)
	if f.hold[name] {
		return model.ReasonRolloutWaiting, "step 2 of 2 waits for step 1"
	}
	return "", ""
}

func (f *fakeRollouts) Done(set *spec.StackSet, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = append(f.done, set.Name+"/"+name)
}

func (f *fakeRollouts) state(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// TestRolloutHoldsAndReleases: a StackSet's stacks pass its rollout
// before each update: a held one waits with the rollout's reason and
// message, and runs once let go; each admitted update gives its slot back
// once, when it ends; the members the rollout sees carry their labels and
// the commit of their branch.
func TestRolloutHoldsAndReleases(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "stacks.yaml")
	doc := oneStack + `stackSets:
  - name: web
    generators:
      - list:
          elements: [{n: a, env: dev}, {n: b, env: prod}]
    strategy:
      rollingSync:
        steps: [{matchLabels: {env: dev}}, {matchLabels: {env: prod}}]
    template:
      metadata: {name: 'web-{{.n}}', labels: {env: '{{.env}}'}}
      spec: {stack: '{{.n}}', projectRepo: 'https://git.example/app.git', branch: main}
`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	list := func(set *spec.StackSet) ([]spec.Generated, error) {
		var out []spec.Generated
		for _, e := range set.Spec.Generators[0].List.Elements {
			out = append(out, spec.Generated{Params: e, Generator: "generators[0]"})
		}
		return out, nil
	}
	cfg, diags, err := spec.LoadInputsExpanding([]spec.Input{{Source: dir, Path: file}}, list)
	if err != nil {
		t.Fatalf("%v %v", err, diags)
	}
	ro := &fakeRollouts{hold: map[string]bool{"web-b": true}, members: map[string][]model.RolloutMember{}}
	h := newHarness(t, oneStack, func(o *Options) { o.Rollouts = ro })
	if err := h.d.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()

	h.eventually("web-a deployed", func() bool { l := h.last("web-a"); return l != nil && l.LastSuccessfulCommit == sha1 })
	h.eventually("web-b held", func() bool {
		v, err := h.d.Stack("web-b")
		c := v.Status.Condition(model.ConditionReconciling)
		return err == nil && c != nil && c.Reason == model.ReasonRolloutWaiting && c.Message == "step 2 of 2 waits for step 1"
	})
	if v, _ := h.d.Stack("web-b"); v.Owner != "StackSet/web" || v.Status.LastUpdate != nil {
		t.Fatalf("held web-b: owner %q, last update %+v", v.Owner, v.Status.LastUpdate)
	}
	ro.state(func() {
		ms := ro.members["web-b"]
		if len(ms) != 2 {
			t.Fatalf("members %+v", ms)
		}
		for _, m := range ms {
			if m.Commit != sha1 || m.Labels["env"] == "" || m.Generation == 0 {
				t.Errorf("member %+v", m)
			}
		}
		ro.hold["web-b"] = false
	})
	h.d.Sync("web-b") // what a rollout's step completing does: it looks again
	h.eventually("web-b deployed", func() bool { l := h.last("web-b"); return l != nil && l.LastSuccessfulCommit == sha1 })
	h.eventually("the slots given back", func() bool {
		var done []string
		ro.state(func() { done = slices.Clone(ro.done) })
		slices.Sort(done)
		return slices.Equal(done, []string{"web/web-a", "web/web-b"})
	})
}
