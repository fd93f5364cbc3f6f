package spec

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestExpandPlaceholders(t *testing.T) {
	vars := map[string]string{PlaceholderPRNumber: "7", PlaceholderReviewStack: "app-pr-7"}
	tests := []struct {
		name    string
		in      any
		want    any
		wantErr string
	}{
		{"no placeholder", "t3.large", "t3.large", ""},
		{"pr number", "db-${prNumber}", "db-7", ""},
		{"review stack", "${reviewStack}.example.com", "app-pr-7.example.com", ""},
		{"both, twice", "${reviewStack}/${prNumber}/${prNumber}", "app-pr-7/7/7", ""},
		{"escaped", "$${prNumber} is ${prNumber}", "${prNumber} is 7", ""},
		{"lone dollar", "costs $5 {x}", "costs $5 {x}", ""},
		{"not a string", int64(3), int64(3), ""},
		{"nil", nil, nil, ""},
		{"nested", map[string]any{"tags": []any{"pr-${prNumber}", true}, "name": "${reviewStack}"},
			map[string]any{"tags": []any{"pr-7", true}, "name": "app-pr-7"}, ""},
		{"unknown", "${stack}", nil, "v: unknown placeholder ${stack}: the placeholders are ${prNumber} and ${reviewStack}"},
		{"unknown, not quoted", "${a b}", nil, "v: unknown placeholder: the placeholders are"},
		{"empty", "${}", nil, "v: unknown placeholder: the placeholders are"},
		{"unclosed", "x-${prNumber", nil, `v: a placeholder "${" is not closed by "}"`},
		{"nested error path", map[string]any{"a": []any{"ok", "${nope}"}}, nil, "v.a[1]: unknown placeholder ${nope}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExpandPlaceholders(tt.in, "v", vars)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one starting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

// TestExpandPlaceholdersCopies checks that expanding leaves the value it
// was given alone: it is the template's spec.
func TestExpandPlaceholdersCopies(t *testing.T) {
	in := map[string]any{"list": []any{"${prNumber}"}}
	if _, err := ExpandPlaceholders(in, "v", map[string]string{PlaceholderPRNumber: "1"}); err != nil {
		t.Fatal(err)
	}
	if in["list"].([]any)[0] != "${prNumber}" {
		t.Fatalf("the input changed: %v", in)
	}
}

// TestForReview checks the config a review stack runs with, as the
// runner gets it: the template's values, then the overrides, a later
// value of a key replacing an earlier one.
func TestForReview(t *testing.T) {
	lit := func(v string) ResourceRef { return ResourceRef{Type: RefLiteral, Literal: &LiteralRef{Value: v}} }
	plain := func(k, v string) ConfigValue { return ConfigValue{Key: k, Value: v} }
	secret := func(k, v string) ConfigValue { return ConfigValue{Key: k, Value: v, Secret: true} }
	tests := []struct {
		name        string
		tmpl        StackSpec
		want        []ConfigValue
		wantSecrets []string
		wantErr     string
	}{
		{
			name: "no overrides",
			tmpl: StackSpec{Config: map[string]any{"size": "large"}, ReviewStacks: &ReviewStacks{Enabled: true}},
			want: []ConfigValue{plain("size", "large")},
		},
		{
			name: "replace, add and expand",
			tmpl: StackSpec{Config: map[string]any{"size": "large", "region": "eu-west-1"},
				ReviewStacks: &ReviewStacks{Config: map[string]any{"size": "small", "suffix": "-${reviewStack}", "n": int64(2),
					"tags": map[string]any{"pr": "${prNumber}"}}}},
			want: []ConfigValue{plain("region", "eu-west-1"),
				{Key: "n", Value: "2", JSON: true}, plain("size", "small"), plain("suffix", "-web-pr-12"), {Key: "tags", Value: `{"pr":"12"}`, JSON: true}},
		},
		{
			name: "config replaces configRef",
			tmpl: StackSpec{ConfigRef: map[string]ConfigMapRef{"size": {Name: "sizes", Key: "missing"}, "zone": {Name: "sizes", Key: "zone"}},
				ReviewStacks: &ReviewStacks{Config: map[string]any{"size": "small"}}},
			want: []ConfigValue{plain("zone", "a"), plain("size", "small")},
		},
		{
			name: "another spelling comes after the template's",
			tmpl: StackSpec{Config: map[string]any{"web:size": "large", "aws:region": "eu-west-1"},
				ReviewStacks: &ReviewStacks{Config: map[string]any{"size": "small", "region": "us-east-1"}}},
			want: []ConfigValue{plain("aws:region", "eu-west-1"), plain("web:size", "large"), plain("region", "us-east-1"), plain("size", "small")},
		},
		{
			name: "secret replaces plain and secret",
			tmpl: StackSpec{Config: map[string]any{"token": "plain", "size": "large"}, Secrets: map[string]string{"pw": "old-1"},
				SecretsRef:   map[string]ResourceRef{"key": lit("old-2"), "web:other": lit("kept")},
				ReviewStacks: &ReviewStacks{SecretsRef: map[string]ResourceRef{"token": lit("t"), "pw": lit("p"), "key": lit("k"), "other": lit("o")}}},
			want:        []ConfigValue{plain("size", "large"), secret("web:other", "kept"), secret("key", "k"), secret("other", "o"), secret("pw", "p"), secret("token", "t")},
			wantSecrets: []string{"kept", "k", "o", "p", "t"},
		},
		{
			name: "a secret is not made plain",
			tmpl: StackSpec{SecretsRef: map[string]ResourceRef{"pw": lit("s3cret")},
				ReviewStacks: &ReviewStacks{Config: map[string]any{"pw": "plain"}}},
			wantErr: "reviewStacks.config.pw: the template's secretsRef.pw is a secret",
		},
		{
			name: "nor one that may be the same",
			tmpl: StackSpec{SecretsRef: map[string]ResourceRef{"web:pw": lit("s3cret")},
				ReviewStacks: &ReviewStacks{Config: map[string]any{"pw": "plain"}}},
			wantErr: "reviewStacks.config.pw: may be the same key as the template's secret secretsRef.web:pw",
		},
		{
			name: "a legacy secret is not made plain",
			tmpl: StackSpec{Secrets: map[string]string{"pw": "s3cret"},
				ReviewStacks: &ReviewStacks{Config: map[string]any{"web:pw": "plain"}}},
			wantErr: "reviewStacks.config.web:pw: may be the same key as the template's secret secrets.pw",
		},
		{
			name:    "unknown placeholder",
			tmpl:    StackSpec{ReviewStacks: &ReviewStacks{Config: map[string]any{"a": map[string]any{"b": "${pr}"}}}},
			wantErr: "reviewStacks.config.a.b: unknown placeholder ${pr}",
		},
	}
	cfg := &Config{ConfigMaps: map[string]map[string]string{"sizes": {"zone": "a"}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := &Stack{Name: "web", Spec: tt.tmpl, Dir: "/etc/stackd"}
			before := ContentHash(tmpl.Spec)
			got, err := tmpl.ForReview("web-pr-12", 12)
			if ContentHash(tmpl.Spec) != before || tmpl.Spec.ReviewStacks == nil {
				t.Fatalf("the template's spec changed: %+v", tmpl.Spec)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one starting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Spec.ReviewStacks != nil {
				t.Errorf("the review stack's spec keeps reviewStacks")
			}
			if got.Name != "web" || got.Dir != "/etc/stackd" {
				t.Errorf("name %q, dir %q: want the template's, which resolve references", got.Name, got.Dir)
			}
			values, secrets, err := cfg.StackConfig(got, RefSources{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(values, tt.want) || !slices.Equal(secrets, tt.wantSecrets) {
				t.Errorf("config %+v, secrets %q\nwant %+v, %q", values, secrets, tt.want, tt.wantSecrets)
			}
		})
	}
}

// TestForReviewEnv: a review stack's environment is the template's, a
// variable of reviewStacks.envRefs replacing the template's of the same
// name; the template keeps its own.
func TestForReviewEnv(t *testing.T) {
	lit := func(v string) ResourceRef { return ResourceRef{Type: RefLiteral, Literal: &LiteralRef{Value: v}} }
	for _, tt := range []struct {
		name string
		tmpl StackSpec
		want map[string]string
	}{
		{"replace and add", StackSpec{EnvRefs: map[string]ResourceRef{"REGION": lit("eu-west-1"), "KEEP": lit("k")},
			ReviewStacks: &ReviewStacks{EnvRefs: map[string]ResourceRef{"REGION": lit("us-east-1"), "EXTRA": lit("e")}}},
			map[string]string{"REGION": "us-east-1", "KEEP": "k", "EXTRA": "e"}},
		{"the template has none", StackSpec{ReviewStacks: &ReviewStacks{EnvRefs: map[string]ResourceRef{"EXTRA": lit("e")}},
			Config: map[string]any{"size": "large"}},
			map[string]string{"EXTRA": "e"}},
		{"with config overrides", StackSpec{EnvRefs: map[string]ResourceRef{"REGION": lit("eu-west-1")},
			ReviewStacks: &ReviewStacks{EnvRefs: map[string]ResourceRef{"REGION": lit("us-east-1")}, Config: map[string]any{"size": "small"}}},
			map[string]string{"REGION": "us-east-1"}},
		{"none", StackSpec{EnvRefs: map[string]ResourceRef{"REGION": lit("eu-west-1")}, ReviewStacks: &ReviewStacks{Enabled: true}},
			map[string]string{"REGION": "eu-west-1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := &Stack{Name: "web", Spec: tt.tmpl}
			before := ContentHash(tmpl.Spec)
			got, err := tmpl.ForReview("web-pr-3", 3)
			if err != nil {
				t.Fatal(err)
			}
			if ContentHash(tmpl.Spec) != before {
				t.Fatalf("the template's spec changed: %+v", tmpl.Spec)
			}
			cfg := &Config{}
			env, _, err := cfg.StackEnv(got, RefSources{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(env, tt.want) {
				t.Errorf("environment %v, want %v", env, tt.want)
			}
		})
	}
}

// TestForReviewResolves resolves a review stack's config as an operation
// does: the overrides take the template's place, and a secret override
// is resolved as the template's secretsRef and stays secret.
func TestForReviewResolves(t *testing.T) {
	cfg, _ := mustParse(t, minimalStack+`  config:
    size: large
    name: app
  secretsRef:
    token: {type: Secret, secret: {name: creds, key: template}}
  reviewStacks:
    enabled: true
    config:
      name: app-${prNumber}
      labels: {stack: "${reviewStack}"}
    secretsRef:
      token: {type: Secret, secret: {name: creds, key: review}}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {template: t-s3cret, review: r-s3cret}
`)
	tmpl := cfg.Stack("app")
	rs, err := tmpl.ForReview("app-pr-4", 4)
	if err != nil {
		t.Fatal(err)
	}
	values, secrets, err := cfg.StackConfig(rs, RefSources{})
	if err != nil {
		t.Fatal(err)
	}
	want := []ConfigValue{
		{Key: "size", Value: "large"},
		{Key: "labels", Value: `{"stack":"app-pr-4"}`, JSON: true},
		{Key: "name", Value: "app-4"},
		{Key: "token", Value: "r-s3cret", Secret: true},
	}
	if !reflect.DeepEqual(values, want) || !reflect.DeepEqual(secrets, []string{"r-s3cret"}) {
		t.Fatalf("config %+v, secrets %q; want %+v", values, secrets, want)
	}
	values, _, err = cfg.StackConfig(tmpl, RefSources{})
	if err != nil {
		t.Fatal(err)
	}
	if values[0] != (ConfigValue{Key: "name", Value: "app"}) || values[2] != (ConfigValue{Key: "token", Value: "t-s3cret", Secret: true}) {
		t.Fatalf("the template's config changed: %+v", values)
	}
}
