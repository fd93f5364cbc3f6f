package main

import (
	"bytes"
	"html"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// logCard matches the stack page's Log card: the update it shows and the
// text of its log.
var logCard = regexp.MustCompile(`(?s)<h2>Log <code>([^<]*)</code>.*?<pre class="log">(.*?)</pre>`)

// TestE2EDriftChecksFold: a deployed stack checked for drift every
// second keeps one record for its unchanged checks, beside the deploy's;
// the history API (and stackd logs --type) find the deploy when asked
// for ups, and the stack page's Log card shows the deploy's log, naming
// the newer check.
func TestE2EDriftChecksFold(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	in := startDaemon(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)+"    driftDetection:\n      interval: 1s\n"), "")
	in.waitStack("app", "in sync", time.Minute, driftState(spec.DriftInSync))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		finished := finishedUpdates(t, in, "")
		if len(finished) > 0 && finished[0].Checks >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record of 4 folded checks: %+v", finished)
		}
		time.Sleep(200 * time.Millisecond)
	}
	finished := finishedUpdates(t, in, "")
	if len(finished) != 2 || finished[0].Type != model.UpdateDrift || finished[1].Type != model.UpdateUp {
		t.Fatalf("finished updates = %+v; want one folded check, then the deploy", finished)
	}
	check, up := finished[0], finished[1]
	if check.FirstStartTime.IsZero() || !check.FirstStartTime.Before(check.StartTime) || check.Seq < up.Seq+uint64(check.Checks) {
		t.Fatalf("folded check = %+v", check)
	}
	if ups := finishedUpdates(t, in, "?type=up"); len(ups) != 1 || ups[0].ID != up.ID {
		t.Fatalf("?type=up = %+v; want %s alone", ups, up.ID)
	}
	_, upLog := in.get("/api/v1/updates/"+up.ID+"/log", nil)
	if len(upLog) == 0 {
		t.Fatal("the deploy has no log")
	}
	var logs bytes.Buffer
	if err := logsCommand(in.clientArgs("app", "--type", "up"), &logs); err != nil || logs.String() != string(upLog) {
		t.Fatalf("stackd logs app --type up = %q, %v; want the deploy's log", logs.String(), err)
	}
	if err := logsCommand(in.clientArgs("app", "--type", "deploy"), io.Discard); err == nil || !strings.Contains(err.Error(), "valid: up, preview") {
		t.Fatalf("stackd logs app --type deploy = %v; want the valid types named", err)
	}
	// A check may be running when the page is read, whose log the card
	// then rightly shows: read it again until none is.
	for {
		_, page := in.get("/stacks/app", nil)
		m := logCard.FindSubmatch(page)
		if m != nil && string(m[1]) == up.ID {
			if html.UnescapeString(string(m[2])) != string(upLog) {
				t.Fatalf("the Log card shows %q, want the deploy's log %q", html.UnescapeString(string(m[2])), upLog)
			}
			for _, want := range []string{"Newer: drift check", "drift ×"} {
				if !strings.Contains(string(page), want) {
					t.Fatalf("the stack page lacks %q", want)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Log card never showed the deploy %s: %q", up.ID, m)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// finishedUpdates are the finished updates of stack app that the history
// API lists with query, newest first.
func finishedUpdates(t *testing.T, in *instance, query string) []model.Update {
	t.Helper()
	var page struct{ Updates []model.Update }
	if code, body := in.get("/api/v1/stacks/app/updates"+query, &page); code != http.StatusOK {
		t.Fatalf("GET updates%s = %d %s", query, code, body)
	}
	var out []model.Update
	for _, u := range page.Updates {
		if u.State != model.UpdateRunning {
			out = append(out, u)
		}
	}
	return out
}
