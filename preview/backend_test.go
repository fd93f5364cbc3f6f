package preview

import (
	"errors"
	"testing"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// specBackends answers StackBackend as the daemon does, with no
// directories to read references from.
type specBackends struct{ Daemon }

func (specBackends) StackBackend(cfg *spec.Config, s *spec.Stack) (string, error) {
	return cfg.StackBackend(s, spec.RefSources{})
}

// TestMovedState: a pull request's preview of a stack in force runs only
// where the config in force keeps its state: the same Pulumi stack, on
// the backend it resolves to.
func TestMovedState(t *testing.T) {
	p := &Previewer{opts: Options{Daemon: specBackends{}}}
	env := func(v string) map[string]spec.ResourceRef {
		return map[string]spec.ResourceRef{spec.BackendURLEnv: literal(v)}
	}
	docs := func(v string) *spec.Config {
		return &spec.Config{Secrets: map[string]map[string]string{"backend": {"url": v}}}
	}
	tests := []struct {
		name       string
		base, next func(sp *spec.StackSpec)
		nextCfg    *spec.Config // the proposed config; nil: an empty one
		wantErr    bool
	}{
		{name: "unchanged", base: nil, next: func(sp *spec.StackSpec) { sp.Config = map[string]any{"greeting": "bonjour"} }},
		{name: "the same backend", base: func(sp *spec.StackSpec) { sp.Backend = "file:///srv/a" }, next: func(sp *spec.StackSpec) { sp.Backend = "file:///srv/a" }},
		{name: "another backend", base: func(sp *spec.StackSpec) { sp.Backend = "file:///srv/b" }, next: func(sp *spec.StackSpec) { sp.Backend = "file:///srv/a" }, wantErr: true},
		{name: "a backend where there was the default", next: func(sp *spec.StackSpec) { sp.Backend = "s3://other" }, wantErr: true},
		{name: "the default where there was a backend", base: func(sp *spec.StackSpec) { sp.Backend = "s3://bucket" }, wantErr: true},
		{name: "another Pulumi stack", next: func(sp *spec.StackSpec) { sp.Stack = "prod" }, wantErr: true},
		{name: "PULUMI_BACKEND_URL added", next: func(sp *spec.StackSpec) { sp.EnvRefs = env("file:///srv/a") }, wantErr: true},
		{name: "PULUMI_BACKEND_URL changed", base: func(sp *spec.StackSpec) { sp.EnvRefs = env("s3://b") },
			next: func(sp *spec.StackSpec) { sp.EnvRefs = env("s3://a") }, wantErr: true},
		{name: "PULUMI_BACKEND_URL under spec.backend", base: func(sp *spec.StackSpec) { sp.Backend = "s3://b" },
			next: func(sp *spec.StackSpec) { sp.Backend, sp.EnvRefs = "s3://b", env("s3://a") }},
		{name: "PULUMI_BACKEND_URL withheld", base: func(sp *spec.StackSpec) { sp.EnvRefs = env("s3://b") },
			next: func(sp *spec.StackSpec) { sp.EnvRefs = env(notResolved) }, wantErr: true},
		{name: "a Secret document the pull request changes", base: func(sp *spec.StackSpec) {
			sp.EnvRefs = map[string]spec.ResourceRef{spec.BackendURLEnv: secretRef("backend", "url")}
		}, next: func(sp *spec.StackSpec) {
			sp.EnvRefs = map[string]spec.ResourceRef{spec.BackendURLEnv: secretRef("backend", "url")}
		}, nextCfg: docs("s3://a"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, next := gitStack("/checkout", tt.base), gitStack("/pr", tt.next)
			cur, cfg := docs("s3://b"), tt.nextCfg
			if cfg == nil {
				cfg = &spec.Config{}
			}
			err := p.movedState(cur, base, cfg, next)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, errMovedState)) {
				t.Fatalf("err = %v, want an error: %v", err, tt.wantErr)
			}
		})
	}
}

// TestOwnBackend: a stack a pull request adds is previewed on an empty
// backend in the preview's work dir, whatever it names.
func TestOwnBackend(t *testing.T) {
	dir := t.TempDir()
	ws := model.Workspace{Backend: "file:///srv/other", Env: map[string]string{spec.BackendURLEnv: "s3://other", "A": "b"}}
	env := ws.Env
	if err := ownBackend(&ws, dir); err != nil {
		t.Fatal(err)
	}
	if ws.Backend != "file://"+dir+"/backend" || len(ws.Env) != 1 || ws.Env["A"] != "b" {
		t.Fatalf("workspace: %+v", ws)
	}
	if env[spec.BackendURLEnv] != "s3://other" {
		t.Fatal("the resolved environment was changed in place")
	}
}
