package spec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFileBackendPath(t *testing.T) {
	tests := []struct {
		backend, home string
		want          string // the directory; "" for a backend that is no file backend
		wantErr       string
	}{
		{backend: "s3://bucket/state"},
		{backend: "https://api.pulumi.com"},
		{backend: "postgres://db/state"},
		{backend: "file:///srv/state", want: "/srv/state"},
		{backend: "file:///srv/state/", want: "/srv/state"},
		{backend: "file:///srv//state?no_legacy_dirs=true", want: "/srv/state"},
		{backend: "file:///", want: "/"},
		{backend: "file://~", home: "/home/op", want: "/home/op"},
		{backend: "file://~/state", home: "/home/op", want: "/home/op/state"},
		{backend: "file://~", wantErr: "write its absolute path"},
		{backend: "file://~", home: "relative", wantErr: "write its absolute path"},
		{backend: "file://", wantErr: "needs a directory"},
		{backend: "file://?x=1", wantErr: "needs a directory"},
		{backend: "file://state", wantErr: "needs an absolute path"},
		{backend: "file://./state", wantErr: "needs an absolute path"},
		{backend: "file://.", wantErr: "needs an absolute path"},
		{backend: "file://user:pw@/srv/state", wantErr: "needs an absolute path"},
		{backend: "file:///srv/state/../../var/lib/stackd", wantErr: `may not hold ".."`},
		{backend: "file://../state", wantErr: `may not hold ".."`},
		{backend: "FILE:///srv/state", wantErr: "lowercase"},
	}
	for _, tt := range tests {
		t.Run(tt.backend, func(t *testing.T) {
			dir, isFile, err := FileBackendPath(tt.backend, tt.home)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tt.wantErr)
				}
				if !isFile {
					t.Error("a refused file backend is not said to be one")
				}
			case err != nil:
				t.Fatal(err)
			case dir != tt.want || isFile != (tt.want != ""):
				t.Fatalf("= %q, %v; want %q", dir, isFile, tt.want)
			}
		})
	}
}

// hostRig is a host in a temporary directory: the daemon's data dir and
// secrets dir, a backend root holding a link into the data dir and a
// dangling one that leads into it, a link to the root, and a repository
// root.
type hostRig struct {
	base, data, secrets, roots, repos string
	hosts                             HostPaths
}

func newHostRig(t *testing.T) hostRig {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := hostRig{base: base, data: filepath.Join(base, "data"), secrets: filepath.Join(base, "secrets"),
		roots: filepath.Join(base, "roots"), repos: filepath.Join(base, "repos")}
	for _, d := range []string{r.data, r.secrets, r.roots, r.repos, filepath.Join(r.roots, "a"), filepath.Join(r.data, "stacks", "prod", "src")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		filepath.Join(r.roots, "link"):     r.data,
		filepath.Join(r.roots, "dangling"): filepath.Join(r.data, "not-yet"),
		filepath.Join(base, "roots-link"):  r.roots,
		filepath.Join(r.repos, "prod"):     filepath.Join(r.data, "stacks", "prod", "src"),
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	r.hosts = HostPaths{
		BackendRoots: []string{r.roots},
		RepoRoots:    []string{r.repos},
		Protected: []ProtectedPath{
			{Path: r.data, What: "the data dir (--data-dir)"},
			{Path: r.secrets, What: "--secrets-dir"},
		},
		Home: base,
	}
	return r
}

// TestCheckBackend is the rule on file backends: a config from Git names
// one only under a --backend-root, and no config one in or above the
// daemon's own paths, symbolic links resolved.
func TestCheckBackend(t *testing.T) {
	r := newHostRig(t)
	const (
		inData    = "may not lie in the data dir (--data-dir)"
		aboveData = "may not be a parent of the data dir (--data-dir)"
		noRoot    = "only under a --backend-root directory"
	)
	tests := []struct {
		name    string
		backend string
		fromGit bool
		wantErr string // "" when allowed
	}{
		{name: "the data dir, from Git", backend: "file://" + r.data, fromGit: true, wantErr: inData},
		{name: "the data dir, from a local config", backend: "file://" + r.data, wantErr: inData},
		{name: "the shared plugin cache", backend: "file://" + r.data + "/pulumi-home/plugins", wantErr: inData},
		{name: "the data dir with a slash", backend: "file://" + r.data + "/", wantErr: inData},
		{name: "the data dir's own backend, written out", backend: "file://" + r.data + "/backend", wantErr: inData},
		{name: "the secrets dir", backend: "file://" + r.secrets + "/app", wantErr: "may not lie in --secrets-dir"},
		{name: "a parent of the data dir", backend: "file://" + r.base, wantErr: aboveData},
		{name: "the whole file system", backend: "file:///", wantErr: aboveData},
		{name: "the whole file system, from Git", backend: "file:///", fromGit: true, wantErr: aboveData},
		{name: "home, a parent of the data dir", backend: "file://~", wantErr: aboveData},
		{name: "below home", backend: "file://~/state"},
		{name: "home, from Git", backend: "file://~/roots/a", fromGit: true, wantErr: "may not name a file:// backend in ~"},
		{name: "under the root", backend: "file://" + r.roots + "/a", fromGit: true},
		{name: "under the root, not yet made", backend: "file://" + r.roots + "/b/c", fromGit: true},
		{name: "the root itself", backend: "file://" + r.roots, fromGit: true},
		{name: "through a link to the root", backend: "file://" + r.base + "/roots-link/a", fromGit: true},
		{name: "a link in the root into the data dir", backend: "file://" + r.roots + "/link", fromGit: true, wantErr: inData},
		{name: "below a link in the root into the data dir", backend: "file://" + r.roots + "/link/workspaces", fromGit: true, wantErr: inData},
		{name: "a link in the root into the data dir, from a local config", backend: "file://" + r.roots + "/link", wantErr: inData},
		{name: "a dangling link in the root", backend: "file://" + r.roots + "/dangling", fromGit: true, wantErr: "cannot be resolved"},
		{name: "below a dangling link in the root", backend: "file://" + r.roots + "/dangling/x", fromGit: true, wantErr: "cannot be resolved"},
		{name: "outside the root, from Git", backend: "file://" + r.base + "/elsewhere", fromGit: true, wantErr: noRoot},
		{name: "outside the root, from a local config", backend: "file://" + r.base + "/elsewhere"},
		{name: "out of the root by ..", backend: "file://" + r.roots + "/../data", fromGit: true, wantErr: `".."`},
		{name: "relative", backend: "file://data", fromGit: true, wantErr: "absolute path"},
		{name: "relative, from a local config", backend: "file://./state", wantErr: "absolute path"},
		{name: "no path", backend: "file://", wantErr: "needs a directory"},
		{name: "not a file backend", backend: "s3://bucket/prefix", fromGit: true},
		{name: "a cloud backend", backend: "https://api.pulumi.com", fromGit: true},
		{name: "none", backend: "", fromGit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := r.hosts.CheckBackend(tt.backend, tt.fromGit)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want one saying %q", err, tt.wantErr)
			case err != nil && strings.Contains(err.Error(), r.base) && !strings.Contains(err.Error(), "--backend-root directory ("):
				t.Fatalf("the error quotes the path of the config: %v", err)
			}
		})
	}
}

// TestCheckBackendNoRoot: without --backend-root, a config from Git may
// name no file backend at all, and the error names the flag.
func TestCheckBackendNoRoot(t *testing.T) {
	r := newHostRig(t)
	h := r.hosts
	h.BackendRoots = nil
	err := h.CheckBackend("file://"+r.roots+"/a", true)
	if err == nil || !strings.Contains(err.Error(), "--backend-root") || !strings.Contains(err.Error(), "none is allowed") {
		t.Fatalf("err = %v", err)
	}
	if err := h.CheckBackend("file://"+r.roots+"/a", false); err != nil {
		t.Fatalf("a local config: %v", err)
	}
	if err := (HostPaths{}).CheckBackend("file:///srv/state", true); err == nil {
		t.Fatal("the zero HostPaths lets a config from Git name a file backend")
	}
}

func TestRepoPath(t *testing.T) {
	tests := []struct {
		repo, want, wantErr string
	}{
		{repo: "https://git.example/infra.git"},
		{repo: "git@git.example:infra.git"},
		{repo: "ssh://git@git.example/infra.git"},
		{repo: "/srv/git/infra.git", want: "/srv/git/infra.git"},
		{repo: "./infra.git", want: "/etc/stackd/infra.git"},
		{repo: "../../var/lib/stackd/stacks/prod/src", want: "/var/lib/stackd/stacks/prod/src"},
		{repo: "file:///srv/git/infra.git", want: "/srv/git/infra.git"},
		{repo: "file://localhost/srv/git/infra.git", want: "/srv/git/infra.git"},
		{repo: "file:///srv/git/../../var/lib/stackd", want: "/var/lib/stackd"},
		{repo: "file://host/srv/git", wantErr: "path of this host"},
		{repo: "file://", wantErr: "absolute path"},
	}
	for _, tt := range tests {
		t.Run(tt.repo, func(t *testing.T) {
			got, err := RepoPath(tt.repo, "/etc/stackd")
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
			case err != nil || got != tt.want:
				t.Fatalf("= %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestCheckRepo: a config from Git names a local repository only under a
// --repo-root, never in the data dir (where other stacks' checkouts are),
// links resolved; a local config names any.
func TestCheckRepo(t *testing.T) {
	r := newHostRig(t)
	wide := r.hosts
	wide.RepoRoots = []string{r.base} // a parent of the data dir
	tests := []struct {
		name    string
		hosts   HostPaths
		dir     string
		fromGit bool
		wantErr string
	}{
		{name: "under the root", hosts: r.hosts, dir: r.repos + "/infra.git", fromGit: true},
		{name: "outside the root", hosts: r.hosts, dir: r.base + "/elsewhere", fromGit: true, wantErr: "only under a --repo-root directory"},
		{name: "a link in the root to another stack's checkout", hosts: r.hosts, dir: r.repos + "/prod", fromGit: true, wantErr: "in the data dir"},
		{name: "another stack's checkout under a wide root", hosts: wide, dir: r.data + "/stacks/prod/src", fromGit: true, wantErr: "in the data dir"},
		{name: "no root", hosts: HostPaths{}, dir: r.repos + "/infra.git", fromGit: true, wantErr: "none is allowed"},
		{name: "a local config", hosts: r.hosts, dir: r.data + "/stacks/prod/src"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.hosts.CheckRepo(tt.dir, tt.fromGit)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want one saying %q", err, tt.wantErr)
			}
		})
	}
}

func TestCheckRoot(t *testing.T) {
	r := newHostRig(t)
	for root, wantErr := range map[string]string{
		r.roots:                 "",
		r.base:                  "", // a parent: what lies in the data dir stays refused
		r.data:                  "lies in the data dir",
		r.data + "/backends":    "lies in the data dir",
		r.roots + "/link":       "lies in the data dir",
		r.secrets:               "lies in --secrets-dir",
		"roots":                 "not an absolute path",
		"/":                     "",
		r.roots + "/../data/x/": "lies in the data dir",
	} {
		err := r.hosts.CheckRoot(root)
		if (wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("CheckRoot(%s) = %v, want %q", root, err, wantErr)
		}
	}
}

// TestValidateHostPaths: validation refuses what a config may not name,
// at file:line:column with the field, and says which flag allows it.
func TestValidateHostPaths(t *testing.T) {
	r := newHostRig(t)
	checkout := filepath.Join(r.data, "config", "abc", "0123456789ab")
	if err := os.MkdirAll(filepath.Join(checkout, "stacks"), 0o700); err != nil {
		t.Fatal(err)
	}
	doc := `stacks:
  - name: app
    stack: dev
    projectRepo: https://git.example/app.git
    branch: main
    backend: "@BACKEND@"
  - name: env
    stack: dev
    projectRepo: https://git.example/app.git
    branch: main
    envRefs:
      PULUMI_BACKEND_URL: {type: Literal, literal: {value: "@BACKEND@"}}
    reviewStacks:
      envRefs:
        PULUMI_BACKEND_URL: {type: Literal, literal: {value: "@BACKEND@"}}
  - name: local
    stack: dev
    projectRepo: "@REPO@"
    branch: main
`
	load := func(t *testing.T, backend, repo string, fromGit bool) (Diagnostics, error) {
		t.Helper()
		dir, in := filepath.Join(r.base, "local"), Input{HostPaths: r.hosts}
		if fromGit {
			dir, in.Root, in.Shown = filepath.Join(checkout, "stacks"), checkout, "https://git.example/config.git//stacks"
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		text := strings.NewReplacer("@BACKEND@", backend, "@REPO@", repo).Replace(doc)
		if err := os.WriteFile(filepath.Join(dir, "stacks.yaml"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		in.Source, in.Path = dir, dir
		_, diags, err := LoadInputs([]Input{in})
		return diags, err
	}

	t.Run("from Git", func(t *testing.T) {
		diags, err := load(t, "file://"+r.data, "/srv/git/app.git", true)
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("err = %v", err)
		}
		want := []string{
			"https://git.example/config.git//stacks/stacks.yaml:6:14: stacks[0].backend: a file:// backend may not lie in the data dir (--data-dir)",
			"https://git.example/config.git//stacks/stacks.yaml:12:60: stacks[1].envRefs.PULUMI_BACKEND_URL.literal.value: a file:// backend may not lie in the data dir",
			"https://git.example/config.git//stacks/stacks.yaml:15:62: stacks[1].reviewStacks.envRefs.PULUMI_BACKEND_URL.literal.value: a file:// backend may not lie in the data dir",
			"https://git.example/config.git//stacks/stacks.yaml:18:18: stacks[2].projectRepo: a config from Git may name a local repository only under a --repo-root directory",
		}
		got := list(diags)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("no diagnostic %q in:\n%s", w, got)
			}
		}
		if strings.Contains(got, r.data) {
			t.Errorf("a diagnostic quotes the backend:\n%s", got)
		}
	})
	t.Run("from Git, outside the root", func(t *testing.T) {
		diags, _ := load(t, "file://"+r.base+"/elsewhere", r.repos+"/app.git", true)
		got := list(diags)
		if !strings.Contains(got, "stacks[0].backend: a config from Git may name a file:// backend only under a --backend-root directory ("+r.roots+")") ||
			strings.Contains(got, "projectRepo") {
			t.Errorf("diagnostics:\n%s", got)
		}
	})
	t.Run("from Git, under the roots", func(t *testing.T) {
		if diags, err := load(t, "file://"+r.roots+"/app", r.repos+"/app.git", true); err != nil {
			t.Fatalf("%v\n%s", err, list(diags))
		}
	})
	t.Run("from a local config", func(t *testing.T) {
		diags, _ := load(t, "file:///", "/srv/git/app.git", false)
		got := list(diags)
		if !strings.Contains(got, "stacks[0].backend: a file:// backend may not be a parent of the data dir") || strings.Contains(got, "projectRepo") {
			t.Errorf("diagnostics:\n%s", got)
		}
		if diags, err := load(t, "file://"+r.base+"/elsewhere", "/srv/git/app.git", false); err != nil {
			t.Fatalf("%v\n%s", err, list(diags))
		}
	})
}

// TestCheckStackBackend: what references give, read when the stack runs,
// is held to the same rule, and the error names the field.
func TestCheckStackBackend(t *testing.T) {
	r := newHostRig(t)
	git := &Stack{Name: "app", Root: r.base, Spec: StackSpec{EnvRefs: map[string]ResourceRef{
		BackendURLEnv: {Type: RefSecret, Secret: &SecretSelector{Name: "backend", Key: "url"}}}}}
	legacy := &Stack{Name: "app", Root: r.base}
	local := &Stack{Name: "app"}
	inData := map[string]string{BackendURLEnv: "file://" + r.data}
	tests := []struct {
		name    string
		s       *Stack
		backend string
		env     map[string]string
		wantErr string
	}{
		{name: "backend", s: git, backend: "file://" + r.data, wantErr: "backend: a file:// backend may not lie in the data dir"},
		{name: "envRefs", s: git, env: inData, wantErr: "envRefs.PULUMI_BACKEND_URL: a file:// backend may not lie in the data dir"},
		{name: "envs", s: legacy, env: inData, wantErr: "the environment variable PULUMI_BACKEND_URL (envs, envSecrets): a file:// backend may not lie"},
		{name: "a local config", s: local, env: inData, wantErr: "may not lie in the data dir"},
		{name: "envRefs under the root", s: git, env: map[string]string{BackendURLEnv: "file://" + r.roots + "/a"}},
		{name: "envRefs outside the root", s: git, env: map[string]string{BackendURLEnv: "file:///srv/elsewhere"}, wantErr: "--backend-root"},
		{name: "envRefs outside the root, from a local config", s: local, env: map[string]string{BackendURLEnv: "file:///srv/elsewhere"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := r.hosts.CheckStackBackend(tt.s, tt.backend, tt.env)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want one saying %q", err, tt.wantErr)
			}
		})
	}
}

// TestStackBackend: spec.backend, else PULUMI_BACKEND_URL of envRefs,
// else of envs and envSecrets, as the runner takes them.
func TestStackBackend(t *testing.T) {
	c := &Config{
		Secrets:    map[string]map[string]string{"b": {"url": "s3://from-secret"}},
		ConfigMaps: map[string]map[string]string{"env": {BackendURLEnv: "s3://from-configmap"}},
	}
	secret := ResourceRef{Type: RefSecret, Secret: &SecretSelector{Name: "b", Key: "url"}}
	out := ResourceRef{Type: RefStackOutput, StackOutput: &StackOutputSelect{Stack: "other", Output: "x"}}
	tests := []struct {
		spec    StackSpec
		want    string
		wantErr bool
	}{
		{spec: StackSpec{}, want: ""},
		{spec: StackSpec{Backend: "s3://spec", EnvRefs: map[string]ResourceRef{BackendURLEnv: secret}}, want: "s3://spec"},
		{spec: StackSpec{EnvRefs: map[string]ResourceRef{BackendURLEnv: secret}, Envs: []string{"env"}}, want: "s3://from-secret"},
		{spec: StackSpec{Envs: []string{"env"}}, want: "s3://from-configmap"},
		// Another env ref that cannot be read here does not matter.
		{spec: StackSpec{EnvRefs: map[string]ResourceRef{"OTHER": out}}, want: ""},
		{spec: StackSpec{EnvRefs: map[string]ResourceRef{BackendURLEnv: out}}, wantErr: true},
	}
	for i, tt := range tests {
		got, err := c.StackBackend(&Stack{Name: "app", Spec: tt.spec}, RefSources{})
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("%d: = %q, %v; want %q", i, got, err, tt.want)
		}
	}
}
