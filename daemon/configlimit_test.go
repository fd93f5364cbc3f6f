package daemon

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

// TestGitConfigSourceOverLimit: a commit whose manifests are larger
// together than the source's MaxBytes is not read; the config in force
// stays and the source's status says why.
func TestGitConfigSourceOverLimit(t *testing.T) {
	fetcher := &fakeFetcher{commits: map[string]string{}}
	for _, app := range []string{"net", "app", "db"} {
		fetcher.set("https://git.example/"+app+".git", sha1, nil)
	}
	one := manifestDoc("net", "1")
	fetcher.setTree(sha1, map[string]string{"env/staging/net.yaml": one})
	fetcher.set(manifestsURL, sha1, nil)
	src, err := spec.ParseSource("git+" + manifestsURL + "//env/staging?ref=main")
	if err != nil {
		t.Fatal(err)
	}
	src.MaxBytes = int64(2 * len(one))
	h := &harness{t: t, store: newMemStore(), fetcher: fetcher, runner: &fakeRunner{fail: map[string]error{}}, dir: t.TempDir()}
	h.d, err = New(nil, Options{Store: h.store, Fetcher: h.fetcher, Runner: h.runner, DataDir: h.dir,
		MinResync: 50 * time.Millisecond, BackoffBase: 20 * time.Millisecond, pollEvery: 20 * time.Millisecond,
		Sources: []spec.Source{src}, SourcePoll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h.start()
	h.eventually("net deployed", func() bool { return h.ready("net") })

	fetcher.setTree(sha2, map[string]string{"env/staging/net.yaml": one,
		"env/staging/app.yaml": manifestDoc("app", "2"), "env/staging/db.yaml": manifestDoc("db", "1")})
	fetcher.set(manifestsURL, sha2, nil)
	h.eventually("large commit refused", func() bool { return h.sourceStatus().LatestCommit == sha2 && h.sourceStatus().Error != "" })
	s := h.sourceStatus()
	want := "config source " + src.String() + " is "
	if s.Commit != sha1 || !strings.Contains(s.Error, want) || !strings.Contains(s.Error, "more than --max-config-bytes") {
		t.Fatalf("source status = %+v, want the commit in force and an error with %q", s, want)
	}
	t.Logf("source error: %s", s.Error)
	if _, err := h.d.Stack("app"); !errors.Is(err, ErrUnknownStack) {
		t.Fatalf("a stack of the refused commit was added: %v", err)
	}
}
