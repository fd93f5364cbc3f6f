package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

func TestList(t *testing.T) {
	x, g := newExpander(t)
	set := newSet("s", listGen(map[string]any{"env": "dev"}, map[string]any{"env": "prod", "n": map[string]any{"a": 1}}))
	out := mustExpand(t, x, set)
	want := []spec.Generated{
		{Params: map[string]any{"env": "dev"}, Generator: "generators[0]", Origin: "elements[0]"},
		{Params: map[string]any{"env": "prod", "n": map[string]any{"a": 1}}, Generator: "generators[0]", Origin: "elements[1]"},
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got %#v\nwant %#v", out, want)
	}
	if g.resolves.Load() != 0 {
		t.Errorf("a list generator resolved %d times", g.resolves.Load())
	}
	st := x.Status("s")
	if len(st) != 1 || st[0].Kind != "list" || st[0].Items != 2 || st[0].Error != "" || st[0].LastSuccess.IsZero() {
		t.Errorf("status = %+v", st)
	}
}

func TestDirectoriesExcludesAndDoubleStar(t *testing.T) {
	r := newRepo(t)
	r.write(map[string]string{
		"envs/dev/main.yaml": "", "envs/Prod_EU/main.yaml": "", "envs/staging/main.yaml": "",
		"envs/dev/sub/x": "", "apps/a/overlays/x/f": "", "apps/b/c/overlays/y/f": "", "apps/overlays/z/f": "",
		"README": "",
	})
	r.commit()
	x, _ := newExpander(t)
	set := newSet("s", dirsGen(r.url(), inc("envs/*"), exc("envs/staging"), inc("apps/**/overlays/*")))
	out := mustExpand(t, x, set)
	want := []string{"apps/a/overlays/x", "apps/b/c/overlays/y", "apps/overlays/z", "envs/Prod_EU", "envs/dev"}
	if got := originsOf(out); !slices.Equal(got, want) {
		t.Fatalf("origins = %q, want %q", got, want)
	}
	p := out[3].Params["path"]
	wantP := map[string]any{"path": "envs/Prod_EU", "basename": "Prod_EU", "basenameNormalized": "prod-eu",
		"segments": []any{"envs", "Prod_EU"}}
	if !reflect.DeepEqual(p, wantP) {
		t.Errorf("path params = %#v, want %#v", p, wantP)
	}
	if out[0].Generator != "generators[0]" {
		t.Errorf("Generator = %q", out[0].Generator)
	}
}

func TestNewDirectoryAppearsAfterChanged(t *testing.T) {
	r := newRepo(t)
	r.write(map[string]string{"envs/dev/f": ""})
	c1 := r.commit()
	x, _ := newExpander(t)
	set := newSet("s", dirsGen(r.url(), inc("envs/*")))
	if got := originsOf(mustExpand(t, x, set)); !slices.Equal(got, []string{"envs/dev"}) {
		t.Fatalf("origins = %q", got)
	}
	ctx := context.Background()
	if x.Changed(ctx) {
		t.Fatal("Changed before any commit")
	}
	r.write(map[string]string{"envs/qa/f": ""})
	c2 := r.commit()
	if !x.Changed(ctx) {
		t.Fatal("Changed is false after a new commit")
	}
	if got := originsOf(mustExpand(t, x, set)); !slices.Equal(got, []string{"envs/dev", "envs/qa"}) {
		t.Fatalf("origins after the commit = %q", got)
	}
	if x.Changed(ctx) {
		t.Error("Changed after expanding the new commit")
	}
	if st := x.Status("s"); st[0].Commit != c2 || st[0].Commit == c1 || st[0].Items != 2 || st[0].Repository != r.url() {
		t.Errorf("status = %+v, want commit %s", st, c2)
	}
}

func TestWatchReloadsOnCommitAndEndsWithContext(t *testing.T) {
	r := newRepo(t)
	r.write(map[string]string{"envs/dev/f": ""})
	r.commit()
	x, _ := newExpander(t)
	set := newSet("s", dirsGen(r.url(), inc("envs/*")))
	mustExpand(t, x, set)
	ctx, cancel := context.WithCancel(context.Background())
	reloads := make(chan struct{}, 100)
	done := make(chan struct{})
	go func() {
		x.Watch(ctx, 10*time.Millisecond, func() { reloads <- struct{}{} })
		close(done)
	}()
	r.write(map[string]string{"envs/qa/f": ""})
	r.commit()
	select {
	case <-reloads:
	case <-time.After(10 * time.Second):
		t.Fatal("no reload after a commit")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Watch outlived its context")
	}
}

func TestFilesYAMLAndJSON(t *testing.T) {
	r := newRepo(t)
	r.write(map[string]string{
		"envs/dev/config.yaml":  "region: eu-west-1\nsize: 3\ntags:\n  team: a\n",
		"envs/prod/config.json": `{"region": "us-east-1", "size": 5, "ratio": 0.5, "tags": {"team": "b"}}`,
		"envs/prod/other.txt":   "not matched",
	})
	r.commit()
	x, _ := newExpander(t)
	out := mustExpand(t, x, newSet("s", filesGen(r.url(), inc("envs/*/config.*"))))
	if got := originsOf(out); !slices.Equal(got, []string{"envs/dev/config.yaml", "envs/prod/config.json"}) {
		t.Fatalf("origins = %q", got)
	}
	dev := out[0].Params
	wantDev := map[string]any{"region": "eu-west-1", "size": 3, "tags": map[string]any{"team": "a"},
		"path": map[string]any{"path": "envs/dev", "basename": "dev", "basenameNormalized": "dev",
			"segments": []any{"envs", "dev"}, "filename": "config.yaml", "filenameNormalized": "config-yaml"}}
	if !reflect.DeepEqual(dev, wantDev) {
		t.Errorf("dev = %#v\nwant %#v", dev, wantDev)
	}
	prod := out[1].Params
	if prod["region"] != "us-east-1" || prod["size"] != 5 || prod["ratio"] != 0.5 ||
		!reflect.DeepEqual(prod["tags"], map[string]any{"team": "b"}) {
		t.Errorf("prod = %#v", prod)
	}
	if st := x.Status("s"); st[0].Kind != "git files" || st[0].Items != 2 {
		t.Errorf("status = %+v", st)
	}
}

func TestFilesParseErrorPosition(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"config.json", "{\n  \"a\": 1,\n  \"b\" 2\n}\n", "envs/bad/config.json:3:7: "},
		{"config.yaml", "a: 1\nb: [1, 2\nc: 3\n", "envs/bad/config.yaml:"},
		{"config.yaml", "- a\n- b\n", "envs/bad/config.yaml:1:1: the document is not a mapping"},
		{"config.yaml", "path: x\n", "envs/bad/config.yaml: a top-level field path"},
	} {
		r := newRepo(t)
		r.write(map[string]string{"envs/bad/" + tc.name: tc.content})
		r.commit()
		x, _ := newExpander(t)
		_, err := x.Expand(newSet("s", filesGen(r.url(), inc("envs/*/config.*"))))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want it to contain %q", tc.content, err, tc.want)
		}
	}
}

func TestFilesBounds(t *testing.T) {
	r := newRepo(t)
	r.write(map[string]string{"a/c.yaml": "a: 1\n", "b/c.yaml": "a: 1\n", "big/c.yaml": "a: " + strings.Repeat("x", 200) + "\n"})
	r.commit()
	x, _ := newExpander(t, func(o *Options) { o.MaxFiles = 1 })
	if _, err := x.Expand(newSet("s", filesGen(r.url(), inc("*/c.yaml")))); err == nil || !strings.Contains(err.Error(), "more than 1 files") {
		t.Errorf("MaxFiles: err = %v", err)
	}
	x, _ = newExpander(t, func(o *Options) { o.MaxFileBytes = 100 })
	if _, err := x.Expand(newSet("s", filesGen(r.url(), inc("big/c.yaml")))); err == nil || !strings.Contains(err.Error(), "big/c.yaml: larger than 100 bytes") {
		t.Errorf("MaxFileBytes: err = %v", err)
	}
}

// A committer may link to anything: no link is followed, so nothing
// outside the checkout is listed or read.
func TestSymlinksAreNotFollowed(t *testing.T) {
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(outside, "secret", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret", "config.yaml"), []byte("stolen: yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newRepo(t)
	r.write(map[string]string{"envs/dev/config.yaml": "a: 1\n"})
	r.link("envs/out", outside)
	r.link("envs/up", "../..")
	r.link("envs/dev/linked.yaml", filepath.Join(outside, "secret", "config.yaml"))
	r.link("envs/devlink", "dev")
	r.commit()
	x, _ := newExpander(t)
	dirs := originsOf(mustExpand(t, x, newSet("d", dirsGen(r.url(), inc("**")))))
	// The links are in the checkout: the walk met them and passed by.
	cos, _ := filepath.Glob(filepath.Join(x.opts.Dir, "*", "envs", "out"))
	if len(cos) != 1 {
		t.Fatalf("the checkout holds no envs/out: %q", cos)
	}
	if fi, err := os.Lstat(cos[0]); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("envs/out of the checkout is no link: %v %v", fi, err)
	}
	if !slices.Equal(dirs, []string{"envs", "envs/dev"}) {
		t.Errorf("directories = %q, want only envs and envs/dev", dirs)
	}
	files := mustExpand(t, x, newSet("f", filesGen(r.url(), inc("**/*.yaml"))))
	if got := originsOf(files); !slices.Equal(got, []string{"envs/dev/config.yaml"}) {
		t.Errorf("files = %q, want only envs/dev/config.yaml", got)
	}
	for _, f := range files {
		if _, ok := f.Params["stolen"]; ok {
			t.Errorf("read a file outside the checkout: %v", f.Params)
		}
	}
}

func TestMatrix(t *testing.T) {
	r := newRepo(t)
	r.write(map[string]string{"envs/dev/f": "", "envs/prod/f": "", "apps/web/f": ""})
	r.commit()
	x, _ := newExpander(t)
	set := newSet("s", spec.Generator{Matrix: &spec.MatrixGenerator{Generators: []spec.Generator{
		dirsGen(r.url(), inc("envs/*")),
		listGen(map[string]any{"cloud": "aws"}, map[string]any{"cloud": "gcp"}),
	}}})
	out := mustExpand(t, x, set)
	want := []string{"envs/dev × elements[0]", "envs/dev × elements[1]", "envs/prod × elements[0]", "envs/prod × elements[1]"}
	if got := originsOf(out); !slices.Equal(got, want) {
		t.Fatalf("origins = %q, want %q", got, want)
	}
	if p := out[1].Params; p["cloud"] != "gcp" || p["path"].(map[string]any)["basename"] != "dev" {
		t.Errorf("params = %#v", p)
	}
	if st := x.Status("s"); st[0].Kind != "matrix" || st[0].Items != 4 || st[0].Repository != r.url() || st[0].Commit == "" {
		t.Errorf("status = %+v", st)
	}

	for _, tc := range []struct {
		name string
		a, b spec.Generator
		want string
	}{
		{"scalar", listGen(map[string]any{"env": "dev"}), listGen(map[string]any{"env": "prod"}), "parameter env has different values"},
		{"nested path", dirsGen(r.url(), inc("envs/*")), dirsGen(r.url(), inc("apps/*")), "parameter path.basename has different values"},
		{"path and scalar", dirsGen(r.url(), inc("envs/*")), listGen(map[string]any{"path": "x"}), "parameter path has different values"},
	} {
		set := newSet("c-"+tc.name, spec.Generator{Matrix: &spec.MatrixGenerator{Generators: []spec.Generator{tc.a, tc.b}}})
		if _, err := x.Expand(set); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	// Equal values of a key both hold are no conflict.
	same := newSet("same", spec.Generator{Matrix: &spec.MatrixGenerator{Generators: []spec.Generator{
		listGen(map[string]any{"env": "dev", "a": 1}), listGen(map[string]any{"env": "dev", "b": 2})}}})
	if out := mustExpand(t, x, same); !reflect.DeepEqual(out[0].Params, map[string]any{"env": "dev", "a": 1, "b": 2}) {
		t.Errorf("params = %#v", out[0].Params)
	}
}

func TestMerge(t *testing.T) {
	r := newRepo(t)
	r.write(map[string]string{"envs/dev/f": "", "envs/prod/f": ""})
	r.commit()
	x, _ := newExpander(t)
	merge := func(later ...spec.Generator) *spec.StackSet {
		return newSet("s", spec.Generator{Merge: &spec.MergeGenerator{MergeKeys: []string{"path.basename"},
			Generators: append([]spec.Generator{dirsGen(r.url(), inc("envs/*"))}, later...)}})
	}
	out := mustExpand(t, x, merge(listGen(
		map[string]any{"path": map[string]any{"basename": "prod"}, "size": "large"},
		map[string]any{"path": map[string]any{"basename": "qa"}, "size": "small"},
	)))
	if got := originsOf(out); !slices.Equal(got, []string{"envs/dev", "envs/prod + elements[0]"}) {
		t.Fatalf("origins = %q", got)
	}
	if _, ok := out[0].Params["size"]; ok {
		t.Errorf("dev was overlaid: %#v", out[0].Params)
	}
	prod := out[1].Params
	if prod["size"] != "large" || prod["path"].(map[string]any)["path"] != "envs/prod" {
		t.Errorf("prod = %#v", prod)
	}
	_, err := x.Expand(merge(listGen(map[string]any{"path": map[string]any{"basename": "dev"}},
		map[string]any{"path": map[string]any{"basename": "dev"}})))
	if err == nil || !strings.Contains(err.Error(), "merge.generators[1]: elements[0] and elements[1] have the same values") {
		t.Errorf("duplicate merge key: err = %v", err)
	}
}

// A failing generator changes nothing: the set keeps its last good
// output, and the status says why.
func TestUnreachableKeepsLastGood(t *testing.T) {
	r := newRepo(t)
	r.write(map[string]string{"envs/dev/f": "", "envs/prod/f": ""})
	c1 := r.commit()
	var clk clock
	clk.now.Store(1000)
	x, _ := newExpander(t, func(o *Options) { o.Now = clk.Now })
	set := newSet("s", listGen(map[string]any{"a": 1}), dirsGen(r.url(), inc("envs/*")))
	good := mustExpand(t, x, set)
	if len(good) != 3 {
		t.Fatalf("got %d sets", len(good))
	}
	if err := os.Rename(r.dir, r.dir+".gone"); err != nil {
		t.Fatal(err)
	}
	clk.now.Store(2000)
	out, err := x.Expand(set)
	if err != nil {
		t.Fatalf("Expand after the repository went away: %v", err)
	}
	if !reflect.DeepEqual(out, good) {
		t.Errorf("output changed: %v", originsOf(out))
	}
	st := x.Status("s")
	if st[0].Error != "" || !st[0].LastSuccess.Equal(clk.Now()) {
		t.Errorf("list status = %+v", st[0])
	}
	g := st[1]
	if g.Error == "" || g.Commit != c1 || g.Items != 2 || !g.LastSuccess.Equal(time.Unix(1000, 0)) || g.Kind != "git directories" {
		t.Errorf("git status = %+v", g)
	}
	if x.Changed(context.Background()) {
		t.Error("Changed while the repository is unreachable")
	}
	// Other definitions have no last good output.
	set2 := newSet("s", dirsGen(r.url(), inc("envs/dev")))
	if _, err := x.Expand(set2); err == nil {
		t.Error("changed definitions of an unreachable repository: no error")
	}
}

func TestUnreachableWithoutPreviousIsError(t *testing.T) {
	x, _ := newExpander(t)
	url := "file://" + filepath.Join(t.TempDir(), "missing")
	_, err := x.Expand(newSet("s", dirsGen(url, inc("*"))))
	if err == nil || !strings.Contains(err.Error(), "stackset s: generators[0]: git: resolve HEAD") {
		t.Fatalf("err = %v", err)
	}
	if st := x.Status("s"); len(st) != 1 || st[0].Error == "" || !st[0].LastSuccess.IsZero() {
		t.Errorf("status = %+v", st)
	}
}

func TestOneResolvePerRepository(t *testing.T) {
	r := newRepo(t)
	r.write(map[string]string{"envs/dev/c.yaml": "a: 1\n"})
	r.commit()
	x, g := newExpander(t)
	set := newSet("s", dirsGen(r.url(), inc("envs/*")), filesGen(r.url(), inc("envs/*/c.yaml")),
		spec.Generator{Matrix: &spec.MatrixGenerator{Generators: []spec.Generator{
			dirsGen(r.url(), inc("envs/*")), listGen(map[string]any{"x": 1})}}})
	mustExpand(t, x, set)
	if n := g.resolves.Load(); n != 1 {
		t.Errorf("%d Resolve calls for one repository", n)
	}
}

func TestOfflineEvaluatesNoGit(t *testing.T) {
	x, g := newExpander(t, func(o *Options) { o.Offline = true })
	set := newSet("s", listGen(map[string]any{"a": 1}), dirsGen("https://example.invalid/r.git", inc("*")))
	out := mustExpand(t, x, set)
	if len(out) != 1 || g.resolves.Load() != 0 {
		t.Errorf("got %d sets, %d resolves", len(out), g.resolves.Load())
	}
	if st := x.Status("s"); st[1].Error != offlineError || st[1].Repository != "https://example.invalid/r.git" {
		t.Errorf("status = %+v", st)
	}
}

func TestCredentialsInURLAreRefused(t *testing.T) {
	x, _ := newExpander(t)
	_, err := x.Expand(newSet("s", dirsGen("https://user:hunter2@example.invalid/r.git", inc("*"))))
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "credentials in the URL") {
		t.Errorf("err = %v", err)
	}
	st := x.Status("s")
	if strings.Contains(st[0].Repository, "hunter2") || strings.Contains(st[0].Error, "hunter2") {
		t.Errorf("status shows the password: %+v", st)
	}
}

func TestUnusedCheckoutsAreRemoved(t *testing.T) {
	r1, r2 := newRepo(t), newRepo(t)
	for _, r := range []*repo{r1, r2} {
		r.write(map[string]string{"envs/dev/f": ""})
		r.commit()
	}
	x, _ := newExpander(t)
	entries := func() []string {
		es, _ := os.ReadDir(x.opts.Dir)
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	mustExpand(t, x, newSet("a", dirsGen(r1.url(), inc("envs/*"))))
	mustExpand(t, x, newSet("b", dirsGen(r1.url(), inc("envs/*"))))
	first := entries()
	if len(first) != 1 {
		t.Fatalf("checkouts = %q, want one shared", first)
	}
	mustExpand(t, x, newSet("a", dirsGen(r2.url(), inc("envs/*"))))
	if got := entries(); len(got) != 2 {
		t.Fatalf("checkouts = %q, want r1's (b) and r2's (a)", got)
	}
	mustExpand(t, x, newSet("b", dirsGen(r2.url(), inc("envs/*"))))
	if got := entries(); len(got) != 1 || got[0] == first[0] {
		t.Fatalf("checkouts = %q, want r2's only", got)
	}
	x.Keep(nil)
	if got := entries(); len(got) != 0 || x.Status("a") != nil {
		t.Fatalf("after Keep(nil): checkouts = %q", got)
	}
}

// Status and Changed may be called while an expansion runs.
func TestConcurrentUse(t *testing.T) {
	r := newRepo(t)
	r.write(map[string]string{"envs/dev/f": ""})
	r.commit()
	x, _ := newExpander(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			x.Status("s")
			x.Changed(ctx)
		}
	}()
	for i := range 5 {
		mustExpand(t, x, newSet("s", dirsGen(r.url(), inc("envs/*"))))
		mustExpand(t, x, newSet(fmt.Sprint("t", i), listGen(map[string]any{"a": i})))
	}
	cancel()
	<-done
}

func TestOfflineStillRefusesCredentials(t *testing.T) {
	x, _ := newExpander(t, func(o *Options) { o.Offline = true })
	_, err := x.Expand(newSet("s", dirsGen("https://tok@example.invalid/r.git", inc("*"))))
	if err == nil || strings.Contains(err.Error(), "tok@") {
		t.Errorf("err = %v", err)
	}
}

// TestCredentialQueryIsRefused: a token in a repository URL's query is a
// credential as user info is: refused, and shown nowhere.
func TestCredentialQueryIsRefused(t *testing.T) {
	x, _ := newExpander(t)
	_, err := x.Expand(newSet("s", dirsGen("https://example.invalid/r.git?private_token=glpat-hunter2", inc("*"))))
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "credentials in the URL") {
		t.Errorf("err = %v", err)
	}
	st := x.Status("s")
	if strings.Contains(st[0].Repository, "hunter2") || strings.Contains(st[0].Error, "hunter2") {
		t.Errorf("status shows the token: %+v", st)
	}
}
