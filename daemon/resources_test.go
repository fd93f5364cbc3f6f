package daemon

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/scrub"
)

// TestResourcesRecorded: an up's exported resources are stored with the
// up as their creator and IDs scrubbed of the daemon's secrets, and read
// back with drift statuses.
func TestResourcesRecorded(t *testing.T) {
	h := newHarness(t, oneStack, func(o *Options) { o.Redactor = scrub.NewRedactor("hunter2-secret") })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	now := time.Now()
	h.runner.resources = []model.Resource{
		{URN: "urn:s", Type: "pulumi:pulumi:Stack", Name: "s", Created: now.Add(time.Second), Modified: now.Add(time.Second)},
		{URN: "urn:f", Type: "stackdtest:index:File", Name: "f", ID: "/srv/hunter2-secret", Parent: "urn:s",
			Created: now.Add(time.Second), Modified: now.Add(time.Second)},
	}
	h.start()
	h.eventually("first deploy", func() bool { return h.ready("app") })
	rs, err := h.d.StackResources("app")
	if err != nil || len(rs.Resources) != 2 {
		t.Fatalf("StackResources = %+v, %v", rs, err)
	}
	f := rs.Resources[1]
	if f.ChangedBy != h.last("app").Name || rs.Update != f.ChangedBy || strings.Contains(f.ID, "hunter2") {
		t.Errorf("resource = %+v of snapshot %s, want changed by the up and its ID scrubbed", f, rs.Update)
	}
	if _, err := h.d.StackResources("nope"); !errors.Is(err, ErrUnknownStack) {
		t.Errorf("StackResources(nope) = %v", err)
	}
}

// exportObserver counts failed exports.
type exportObserver struct {
	nopObserver
	failed atomic.Int32
}

func (o *exportObserver) ResourcesExportFailed(string) { o.failed.Add(1) }

// TestResourcesExportFailed: an up after which the export fails leaves
// the resources of the last export, and is counted.
func TestResourcesExportFailed(t *testing.T) {
	obs := &exportObserver{}
	h := newHarness(t, oneStack, func(o *Options) { o.Observer = obs })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.runner.resources = []model.Resource{{URN: "urn:s", Type: "pulumi:pulumi:Stack", Name: "s"}}
	h.start()
	h.eventually("first deploy", func() bool { return h.ready("app") })
	first := h.last("app").Name
	h.runner.mu.Lock()
	h.runner.exportFails = true
	h.runner.mu.Unlock()
	h.fetcher.set("https://git.example/app.git", sha2, nil)
	h.eventually("the second up", func() bool { l := h.last("app"); return l != nil && l.Name != first && h.ready("app") })
	if n := obs.failed.Load(); n != 1 {
		t.Errorf("%d failed exports counted, want 1", n)
	}
	rs, err := h.d.StackResources("app")
	if err != nil || rs.Update != first || len(rs.Resources) != 1 {
		t.Errorf("StackResources = %+v, %v; want the first up's snapshot", rs, err)
	}
}
