package spec

import "testing"

func TestRefIsSecret(t *testing.T) {
	tests := []struct {
		env  string
		ref  ResourceRef
		want bool
	}{
		// A literal is written in the config, which may be the only place
		// a secret is kept: every one is treated as a secret.
		{"REGION", ResourceRef{Type: RefLiteral, Literal: &LiteralRef{Value: "eu"}}, true},
		{"AWS_SECRET_ACCESS_KEY", ResourceRef{Type: RefLiteral, Literal: &LiteralRef{Value: "x"}}, true},
		{"ANY", ResourceRef{Type: RefSecret, Secret: &SecretSelector{Name: "a", Key: "b"}}, true},
		{"ANY", ResourceRef{Type: RefFS, Filesystem: &FSSelector{Path: "/f"}}, true},
		{"AWS_PROFILE", ResourceRef{Type: RefEnv, Env: &EnvSelector{Name: "AWS_PROFILE"}}, false},
		{"GITHUB_TOKEN", ResourceRef{Type: RefEnv, Env: &EnvSelector{Name: "X"}}, true},
		{"X", ResourceRef{Type: RefEnv, Env: &EnvSelector{Name: "DB_PASSWORD"}}, true},
		{"VPC", ResourceRef{Type: RefStackOutput, StackOutput: &StackOutputSelect{Stack: "net", Output: "vpcId"}}, false},
		{"X", ResourceRef{Type: RefStackOutput, StackOutput: &StackOutputSelect{Stack: "db", Output: "privateKey"}}, true},
	}
	for _, tt := range tests {
		if got := tt.ref.IsSecret(tt.env); got != tt.want {
			t.Errorf("IsSecret of %s (%s) = %v, want %v", tt.env, tt.ref.Type, got, tt.want)
		}
	}
}
