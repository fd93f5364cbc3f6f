package preview

import (
	"reflect"
	"testing"

	"github.com/stackd/stackd/daemon/spec"
)

func secretRef(name, key string) spec.ResourceRef {
	return spec.ResourceRef{Type: spec.RefSecret, Secret: &spec.SecretSelector{Name: name, Key: key}}
}

func envRef(name string) spec.ResourceRef {
	return spec.ResourceRef{Type: spec.RefEnv, Env: &spec.EnvSelector{Name: name}}
}

func fsRef(path string) spec.ResourceRef {
	return spec.ResourceRef{Type: spec.RefFS, Filesystem: &spec.FSSelector{Path: path}}
}

func literal(v string) spec.ResourceRef {
	return spec.ResourceRef{Type: spec.RefLiteral, Literal: &spec.LiteralRef{Value: v}}
}

func outputRef(stack, output string) spec.ResourceRef {
	return spec.ResourceRef{Type: spec.RefStackOutput, StackOutput: &spec.StackOutputSelect{Stack: stack, Output: output}}
}

// gitStack is stack app of a Git config checked out at root, its manifest
// in root/stacks, with the spec f makes.
func gitStack(root string, f func(sp *spec.StackSpec)) *spec.Stack {
	s := &spec.Stack{Name: "app", Root: root, Dir: root + "/stacks",
		Spec: spec.StackSpec{Stack: "dev", ProjectRepo: "https://git.example/acme/infra.git", Branch: "main"}}
	if f != nil {
		f(&s.Spec)
	}
	return s
}

// TestUngranted: a preview of a pull request to a Git config source
// resolves a reference only when the config in force gives the same
// stack one at the same path reading the same source.
func TestUngranted(t *testing.T) {
	db := func(sp *spec.StackSpec) {
		sp.SecretsRef = map[string]spec.ResourceRef{"dbPassword": secretRef("db", "password")}
	}
	token := func(sp *spec.StackSpec) {
		sp.GitAuth = &spec.GitAuthConfig{AccessToken: &spec.ResourceRef{Type: spec.RefSecret, Secret: &spec.SecretSelector{Name: "git", Key: "token"}}}
	}
	both := func(fs ...func(*spec.StackSpec)) func(*spec.StackSpec) {
		return func(sp *spec.StackSpec) {
			for _, f := range fs {
				f(sp)
			}
		}
	}
	tests := []struct {
		name       string
		base, next func(sp *spec.StackSpec) // base nil: a new stack
		newStack   bool
		nextDocs   map[string]map[string]string // Secret documents of the proposed config
		want       []string
	}{
		{name: "the same secretsRef", base: db, next: db},
		{name: "a secretsRef added", base: db, next: both(db, func(sp *spec.StackSpec) {
			sp.SecretsRef["apiKey"] = secretRef("payments", "key")
		}), want: []string{"secretsRef.apiKey"}},
		{name: "another key of the same Secret", base: db, next: func(sp *spec.StackSpec) {
			sp.SecretsRef = map[string]spec.ResourceRef{"dbPassword": secretRef("db", "admin-password")}
		}, want: []string{"secretsRef.dbPassword"}},
		{name: "a granted Secret under another key", base: db, next: func(sp *spec.StackSpec) {
			sp.EnvRefs = map[string]spec.ResourceRef{"DB_PASSWORD": secretRef("db", "password")}
		}, want: []string{"envRefs.DB_PASSWORD"}},
		{name: "a Secret document the pull request adds in place of the file", base: db, next: db,
			nextDocs: map[string]map[string]string{"db": {"password": "x"}}, want: []string{"secretsRef.dbPassword"}},
		{name: "a new stack", newStack: true, next: both(db, func(sp *spec.StackSpec) {
			sp.EnvRefs = map[string]spec.ResourceRef{"REGION": literal("eu-west-1")}
		}), want: []string{"secretsRef.dbPassword"}},
		{name: "literals always resolve", base: nil, newStack: true, next: func(sp *spec.StackSpec) {
			sp.SecretsRef = map[string]spec.ResourceRef{"token": literal("t0")}
			sp.Secrets = map[string]string{"other": "v"}
		}},
		{name: "the same and another environment variable", base: func(sp *spec.StackSpec) {
			sp.EnvRefs = map[string]spec.ResourceRef{"REGION": envRef("AWS_REGION"), "KEY": envRef("API_KEY")}
		}, next: func(sp *spec.StackSpec) {
			sp.EnvRefs = map[string]spec.ResourceRef{"REGION": envRef("AWS_REGION"), "KEY": envRef("ADMIN_KEY")}
		}, want: []string{"envRefs.KEY"}},
		{name: "a file at the same place in both checkouts", base: func(sp *spec.StackSpec) {
			sp.SecretsRef = map[string]spec.ResourceRef{"cert": fsRef("certs/app.pem")}
		}, next: func(sp *spec.StackSpec) {
			sp.SecretsRef = map[string]spec.ResourceRef{"cert": fsRef("../stacks/certs/app.pem")}
		}},
		{name: "another file", base: func(sp *spec.StackSpec) {
			sp.SecretsRef = map[string]spec.ResourceRef{"cert": fsRef("certs/app.pem")}
		}, next: func(sp *spec.StackSpec) {
			sp.SecretsRef = map[string]spec.ResourceRef{"cert": fsRef("certs/admin.pem")}
		}, want: []string{"secretsRef.cert"}},
		{name: "another stack's output", base: func(sp *spec.StackSpec) {
			sp.EnvRefs = map[string]spec.ResourceRef{"VPC": outputRef("network", "vpcId")}
		}, next: func(sp *spec.StackSpec) {
			sp.EnvRefs = map[string]spec.ResourceRef{"VPC": outputRef("network", "vpcId"), "DB": outputRef("db", "password")}
		}, want: []string{"envRefs.DB"}},
		{name: "the same Git credentials for the same repository", base: token, next: token},
		{name: "the same Git credentials for another repository", base: token, next: both(token, func(sp *spec.StackSpec) {
			sp.ProjectRepo = "https://evil.example/infra.git"
		}), want: []string{"gitAuth.accessToken"}},
		{name: "a gitAuthSecret added", base: db, next: both(db, func(sp *spec.StackSpec) { sp.GitAuthSecret = "git" }),
			want: []string{"gitAuthSecret"}},
		{name: "whole Secrets, ConfigMaps and environments added", base: func(sp *spec.StackSpec) {
			sp.EnvSecrets, sp.Environment = []string{"app-env"}, []string{"acme/dev"}
		}, next: func(sp *spec.StackSpec) {
			sp.EnvSecrets, sp.Envs = []string{"app-env", "payments"}, []string{"settings"}
			sp.Environment = []string{"acme/dev", "acme/prod"}
			sp.AccessTokenSecret = "pulumi"
			sp.ConfigRef = map[string]spec.ConfigMapRef{"size": {Name: "settings", Key: "size"}}
		}, want: []string{"accessTokenSecret", "configRef.size", "envSecrets.payments", "environment.acme/prod", "envs.settings"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			baseCfg := &spec.Config{}
			var base *spec.Stack
			if !tt.newStack {
				base = gitStack("/data/sources/1", tt.base)
				baseCfg.Stacks = []*spec.Stack{base}
			}
			next := gitStack("/data/previews/ab12/config", tt.next)
			nextCfg := &spec.Config{Stacks: []*spec.Stack{next}, Secrets: tt.nextDocs}
			if got := ungranted(baseCfg, base, nextCfg, next); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ungranted = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestWithhold: what a preview does not resolve reads nothing, in a copy
// of the stack.
func TestWithhold(t *testing.T) {
	s := gitStack("/data/previews/ab12/config", func(sp *spec.StackSpec) {
		sp.SecretsRef = map[string]spec.ResourceRef{"granted": secretRef("db", "password"), "added": secretRef("payments", "key")}
		sp.EnvRefs = map[string]spec.ResourceRef{"TOKEN": envRef("ADMIN_TOKEN")}
		sp.ConfigRef = map[string]spec.ConfigMapRef{"size": {Name: "settings", Key: "size", JSON: true}}
		sp.EnvSecrets, sp.Environment = []string{"app-env", "payments"}, []string{"acme/prod"}
		sp.AccessTokenSecret = "pulumi"
		sp.GitAuth = &spec.GitAuthConfig{AccessToken: &spec.ResourceRef{Type: spec.RefSecret, Secret: &spec.SecretSelector{Name: "git", Key: "token"}}}
	})
	paths := []string{"accessTokenSecret", "configRef.size", "envRefs.TOKEN", "environment.acme/prod", "envSecrets.payments",
		"gitAuth.accessToken", "secretsRef.added"}
	got := withhold(s, paths)
	placeholder := literal(notResolved)
	sp := &got.Spec
	switch {
	case !reflect.DeepEqual(sp.SecretsRef, map[string]spec.ResourceRef{"granted": secretRef("db", "password"), "added": placeholder}):
		t.Errorf("secretsRef = %+v", sp.SecretsRef)
	case !reflect.DeepEqual(sp.EnvRefs, map[string]spec.ResourceRef{"TOKEN": placeholder}):
		t.Errorf("envRefs = %+v", sp.EnvRefs)
	case len(sp.ConfigRef) != 0 || sp.Config["size"] != notResolved:
		t.Errorf("configRef = %+v, config = %+v", sp.ConfigRef, sp.Config)
	case !reflect.DeepEqual(sp.EnvSecrets, []string{"app-env"}) || len(sp.Environment) != 0 || sp.AccessTokenSecret != "":
		t.Errorf("envSecrets %q, environment %q, accessTokenSecret %q", sp.EnvSecrets, sp.Environment, sp.AccessTokenSecret)
	case sp.GitAuth != nil || sp.GitAuthSecret != "":
		t.Errorf("Git credentials kept: %+v %q", sp.GitAuth, sp.GitAuthSecret)
	}
	if left := ungranted(&spec.Config{}, nil, &spec.Config{Stacks: []*spec.Stack{got}}, got); !reflect.DeepEqual(left, []string{"envSecrets.app-env", "secretsRef.granted"}) {
		t.Errorf("after withhold, a new stack would still read %q (only what was granted should be left)", left)
	}
	if !reflect.DeepEqual(s.Spec.SecretsRef["added"], secretRef("payments", "key")) || len(s.Spec.EnvSecrets) != 2 || s.Spec.GitAuth == nil || s.Spec.Config != nil {
		t.Errorf("withhold changed the stack it was given: %+v", s.Spec)
	}
	if withhold(s, nil) != s {
		t.Error("nothing to withhold: the stack itself is not returned")
	}
}
