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

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"aws:rds/*", "aws:rds/instance:Instance", true},
		{"aws:rds/*", "aws:s3/bucket:Bucket", false},
		{"*", "", true},
		{"*", "anything", true},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "acb", false},
		{"*:Bucket", "aws:s3/bucket:Bucket", true},
		{"a*a", "a", false},
		{"a*a", "aa", true},
		{"*b*b*", "abcb", true},
		{"*b*b*", "abc", false},
		{"a.c", "abc", false},
		{"urn:*::File::*", "urn:pulumi:dev::p::File::note", true},
	} {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}
