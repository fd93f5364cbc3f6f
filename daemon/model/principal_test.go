package model

import "testing"

func TestPrincipalString(t *testing.T) {
	for _, c := range []struct {
		p    Principal
		want string
	}{
		{Principal{Kind: PrincipalUser, Name: "alice"}, "alice"},
		{Principal{Kind: PrincipalToken, Name: "ci"}, "token:ci"},
		{Principal{Kind: PrincipalAdmin}, "admin-token"},
		{Principal{Kind: PrincipalAnonymous}, "anonymous"},
		{Principal{}, "anonymous"},
	} {
		if got := c.p.String(); got != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.p, got, c.want)
		}
	}
}
