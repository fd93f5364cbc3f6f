package spec

import (
	"strings"
	"testing"
)

func TestMassRemoval(t *testing.T) {
	cfg := func(names ...string) *Config {
		c := &Config{}
		for _, n := range names {
			c.Stacks = append(c.Stacks, &Stack{Name: n})
		}
		return c
	}
	tests := []struct {
		cur, next []string
		refused   bool
	}{
		{[]string{"a"}, nil, true},
		{[]string{"a", "b"}, []string{"a"}, false},
		{[]string{"a", "b", "c"}, []string{"a"}, true},
		{[]string{"a", "b", "c", "d"}, []string{"a", "b"}, false},
		{nil, nil, false},
		{[]string{"a"}, []string{"a", "b"}, false},
	}
	for _, tt := range tests {
		if got := MassRemoval(cfg(tt.cur...), cfg(tt.next...)) != ""; got != tt.refused {
			t.Errorf("%v -> %v: refused=%v, want %v", tt.cur, tt.next, got, tt.refused)
		}
	}
}

func TestMassRemovalPerSource(t *testing.T) {
	cfg := func(stacks ...string) *Config {
		c := &Config{}
		for _, s := range stacks {
			src, name, _ := strings.Cut(s, "/")
			c.Stacks = append(c.Stacks, &Stack{Name: name, Source: src})
		}
		return c
	}
	cur := cfg("a/1", "a/2", "a/3", "b/4", "b/5", "b/6", "b/7", "b/8", "b/9")
	tests := []struct {
		name string
		next *Config
		want string // substring of the refusal; empty: allowed
	}{
		{"nothing removed", cfg("a/1", "a/2", "a/3", "b/4", "b/5", "b/6", "b/7", "b/8", "b/9"), ""},
		{"one removed", cfg("a/1", "a/2", "b/4", "b/5", "b/6", "b/7", "b/8", "b/9"), ""},
		{"one source emptied", cfg("b/4", "b/5", "b/6", "b/7", "b/8", "b/9"), "removes 3 of the 3 stacks of a"},
		{"most of a source", cfg("a/1", "b/4", "b/5", "b/6", "b/7", "b/8", "b/9"), "removes 2 of the 3 stacks of a"},
		{"everything", cfg(), "removes 9 of the 9 stacks"},
		{"moved to another source", cfg("b/1", "b/2", "b/3", "b/4", "b/5", "b/6", "b/7", "b/8", "b/9"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MassRemoval(cur, tt.next)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("MassRemoval = %q, want %q", got, tt.want)
			}
		})
	}
}
