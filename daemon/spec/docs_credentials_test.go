package spec

import "testing"

// TestCredentialsExamplesParse keeps the stacks shown in
// docs/credentials.md valid configs, with the credentials they show.
func TestCredentialsExamplesParse(t *testing.T) {
	for _, s := range docStacks(t, "docs/credentials.md") {
		if !s.Spec.Credentials.Any() {
			t.Errorf("%s: no credentials", s.Name)
		}
	}
}
