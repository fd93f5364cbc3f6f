package spec

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// SemverPrefix marks a branch that is a semver range (a Flux
// GitRepository's ref.semver): it resolves to the highest tag whose
// version is in the range, as Flux does (see HighestTag).
const SemverPrefix = "semver:"

// version is a release version: MAJOR.MINOR.PATCH.
type version [3]int

func (v version) compare(w version) int {
	return cmp.Or(cmp.Compare(v[0], w[0]), cmp.Compare(v[1], w[1]), cmp.Compare(v[2], w[2]))
}

// parseVersion reads "v1.2.3" or "1.2.3"; ok is false for anything else,
// pre-releases and build metadata included.
func parseVersion(s string) (version, bool) {
	var v version
	parts := strings.Split(strings.TrimPrefix(s, "v"), ".")
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p == "" || (len(p) > 1 && p[0] == '0') {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

// SemverRange is an OR of ANDs of comparisons.
type SemverRange [][]comparison

type comparison struct {
	op string
	v  version
}

// ParseSemverRange reads the range syntax Flux takes: comparisons (=, !=, >, <,
// >=, <=, ~, ^, or none for =) of versions that may be partial (1, 1.2)
// or have wildcards (1.x, 1.2.*), separated by spaces or commas (and),
// and alternatives separated by ||.
func ParseSemverRange(s string) (SemverRange, error) {
	var r SemverRange
	for _, alt := range strings.Split(s, "||") {
		and := []comparison{} // none: any version
		fields := strings.FieldsFunc(alt, func(c rune) bool { return c == ' ' || c == ',' })
		if len(fields) == 0 {
			return nil, fmt.Errorf("semver range %q: empty", s)
		}
		for _, f := range fields {
			cs, err := parseComparison(f)
			if err != nil {
				return nil, fmt.Errorf("semver range %q: %w", s, err)
			}
			and = append(and, cs...)
		}
		r = append(r, and)
	}
	return r, nil
}

// parseComparison reads one comparison; a partial version or a wildcard
// becomes the range it stands for (1.2 is >=1.2.0 <1.3.0).
func parseComparison(f string) ([]comparison, error) {
	op := ""
	for _, o := range []string{">=", "<=", "!=", ">", "<", "=", "~", "^"} {
		if strings.HasPrefix(f, o) {
			op, f = o, strings.TrimSpace(f[len(o):])
			break
		}
	}
	parts := strings.Split(strings.TrimPrefix(f, "v"), ".")
	if len(parts) > 3 || f == "" {
		return nil, fmt.Errorf("%q is not a version", f)
	}
	var v version
	known := 0 // how many leading parts are numbers
	for i, p := range parts {
		if p == "x" || p == "X" || p == "*" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || known != i { // no number after a wildcard
			return nil, fmt.Errorf("%q is not a version", f)
		}
		v[i], known = n, i+1
	}
	next := func(at int) version { // the first version past v's first at parts
		w := v
		w[at-1]++
		for i := at; i < 3; i++ {
			w[i] = 0
		}
		return w
	}
	switch {
	case op == "^":
		at := 1 // the first non-zero part may not change
		for at < known && v[at-1] == 0 {
			at++
		}
		if known == 0 {
			return nil, nil
		}
		return []comparison{{">=", v}, {"<", next(at)}}, nil
	case op == "~":
		if known == 0 {
			return nil, nil
		}
		return []comparison{{">=", v}, {"<", next(min(known, 2))}}, nil
	case known == 3:
		return []comparison{{cmp.Or(op, "="), v}}, nil
	case known == 0: // *: any version
		return nil, nil
	}
	switch op { // a partial version stands for a range
	case "", "=":
		return []comparison{{">=", v}, {"<", next(known)}}, nil
	case ">":
		return []comparison{{">=", next(known)}}, nil
	case "<=":
		return []comparison{{"<", next(known)}}, nil
	case "!=":
		return nil, fmt.Errorf("%q: != needs a whole version", f)
	}
	return []comparison{{op, v}}, nil // >= and < of the range's first version
}

func (r SemverRange) contains(v version) bool {
	for _, and := range r {
		ok := true
		for _, c := range and {
			d := v.compare(c.v)
			switch c.op {
			case "=":
				ok = ok && d == 0
			case "!=":
				ok = ok && d != 0
			case ">":
				ok = ok && d > 0
			case ">=":
				ok = ok && d >= 0
			case "<":
				ok = ok && d < 0
			case "<=":
				ok = ok && d <= 0
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// HighestTag returns the tag (a short name) with the highest version in
// r, among tags; ok is false when none is. Tags that are not versions,
// and pre-releases, are left out.
func HighestTag(r SemverRange, tags []string) (string, bool) {
	best, bestV, found := "", version{}, false
	for _, t := range tags {
		v, ok := parseVersion(t)
		if !ok || !r.contains(v) {
			continue
		}
		if !found || v.compare(bestV) > 0 {
			best, bestV, found = t, v, true
		}
	}
	return best, found
}
