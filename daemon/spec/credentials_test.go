package spec

import (
	"strings"
	"testing"
)

// TestCredentialsValidation: each problem of spec.credentials names the
// file, line and column and the field's path.
func TestCredentialsValidation(t *testing.T) {
	stack := func(creds string) string {
		return "stacks:\n  - name: app\n    stack: dev\n    projectRepo: https://git.example.com/app.git\n    branch: main\n    credentials:\n" + creds
	}
	for _, tc := range []struct {
		name, creds string
		want        []string // empty: valid
	}{
		{"aws", "      aws: {roleArn: \"arn:aws:iam::123456789012:role/app-write\", readRoleArn: \"arn:aws:iam::123456789012:role/app-read\"}\n", nil},
		{"all", `      aws: {roleArn: "arn:aws-us-gov:iam::123456789012:role/path/app", sessionName: app-deploy}
      gcp: {workloadIdentityProvider: projects/123/locations/global/workloadIdentityPools/stackd/providers/stackd, serviceAccount: deploy@proj.iam.gserviceaccount.com}
      azure: {tenantId: 72f988bf-86f1-41af-91ab-2d7cd011db47, clientId: 00000000-0000-0000-0000-000000000001}
      token: {audience: vault, env: VAULT_JWT_FILE}
`, nil},
		{"empty", "      {}\n", []string{"cfg.yaml:7:7: stacks[0].credentials: names no cloud"}},
		{"bad arn", "      aws: {roleArn: my-role}\n", []string{"cfg.yaml:7:22: stacks[0].credentials.aws.roleArn: \"my-role\" is not a role's ARN"}},
		{"no role", "      aws: {readRoleArn: \"arn:aws:iam::123456789012:role/r\"}\n", []string{"stacks[0].credentials.aws.roleArn: required"}},
		{"gcp", "      gcp: {workloadIdentityProvider: my-pool}\n", []string{"stacks[0].credentials.gcp.workloadIdentityProvider: \"my-pool\" is not a provider's name"}},
		{"azure", "      azure: {tenantId: contoso}\n", []string{"credentials.azure.tenantId: \"contoso\" is not a tenant ID", "credentials.azure.clientId: required"}},
		{"token", "      token: {env: \"1BAD\"}\n", []string{"credentials.token.audience: required", "credentials.token.env: \"1BAD\" is not a variable's name"}},
		{"reserved", "      token: {audience: a, env: PULUMI_BACKEND_URL}\n", []string{"credentials.token.env: PULUMI_BACKEND_URL is a variable stackd or a cloud's credentials set"}},
		{"unknown", "      aws: {role: x}\n", []string{"cfg.yaml:7:13: stacks[0].credentials.aws.role: unknown field"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags, err := Parse("cfg.yaml", []byte(stack(tc.creds)))
			got := joinDiags(diags)
			if err != nil {
				got += err.Error()
			}
			if len(tc.want) == 0 && got != "" {
				t.Fatalf("valid credentials refused: %s", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("want %q in:\n%s", w, got)
				}
			}
		})
	}
}
