package spec

import (
	"strings"
	"testing"
	"time"
)

func TestParseApproval(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *Approval
		err  string
	}{
		{in: "", want: nil},
		{in: "off", want: nil},
		{in: "required", want: &Approval{Required: true}},
		{in: "{when: [delete, replace], maxChanges: 20, types: ['aws:rds/*'], maxAge: 2h}",
			want: &Approval{When: []string{"delete", "replace"}, MaxChanges: 20, Types: []string{"aws:rds/*"}, MaxAge: Duration{2 * time.Hour}}},
		{in: "{when: [remove]}", err: `--approval: when[0]: unknown operation "remove"`},
		{in: "{maxChange: 3}", err: "--approval:1:2: approval.maxChange: unknown field"},
		{in: "[delete]", err: "want required, off, or a mapping"},
	} {
		got, err := ParseApproval(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseApproval(%q) = %v, want error %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseApproval(%q): %v", tc.in, err)
			continue
		}
		if ContentHash(got) != ContentHash(tc.want) {
			t.Errorf("ParseApproval(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
