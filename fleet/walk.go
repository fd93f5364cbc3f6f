package fleet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"unicode"

	"github.com/stackd/stackd/daemon/spec"
)

// glob is a compiled GitPathGlob: its segments, "**" standing for any
// number of them.
type glob struct {
	segs    []string
	exclude bool
}

// compileGlobs checks and splits the patterns of a git generator.
func compileGlobs(gs []spec.GitPathGlob) ([]glob, error) {
	out := make([]glob, 0, len(gs))
	for i, g := range gs {
		p := strings.Trim(g.Path, "/")
		if p == "" {
			return nil, fmt.Errorf("path %d is empty", i)
		}
		segs := strings.Split(p, "/")
		for _, s := range segs {
			if _, err := path.Match(s, ""); err != nil {
				return nil, fmt.Errorf("path %q: %w", g.Path, err)
			}
		}
		out = append(out, glob{segs: segs, exclude: g.Exclude})
	}
	return out, nil
}

// selected says whether a repository-relative path matches some
// non-exclude glob and no exclude one.
func selected(globs []glob, p string) bool {
	name := strings.Split(p, "/")
	in := false
	for _, g := range globs {
		if matchSegs(g.segs, name) {
			if g.exclude {
				return false
			}
			in = true
		}
	}
	return in
}

// matchSegs matches path segments against pattern segments: path.Match
// per segment, "**" for zero or more segments. It is a dynamic program
// over both, so that no pattern makes it exponential.
func matchSegs(pat, name []string) bool {
	// next[j]: pat[i+1:] matches name[j:]; cur[j]: pat[i:] does.
	next := make([]bool, len(name)+1)
	cur := make([]bool, len(name)+1)
	next[len(name)] = true
	for i := len(pat) - 1; i >= 0; i-- {
		for j := len(name); j >= 0; j-- {
			switch {
			case pat[i] == "**":
				cur[j] = next[j] || j < len(name) && cur[j+1]
			case j < len(name):
				ok, _ := path.Match(pat[i], name[j])
				cur[j] = ok && next[j+1]
			default:
				cur[j] = false
			}
		}
		next, cur = cur, next
	}
	return next[0]
}

// mayHold says whether some non-exclude glob could match a path below
// the directory p: the walk does not descend where none could.
func mayHold(globs []glob, p string) bool {
	name := strings.Split(p, "/")
	for _, g := range globs {
		if !g.exclude && matchBelow(g.segs, name) {
			return true
		}
	}
	return false
}

// matchBelow says whether pat could match name followed by one or more
// segments: the dynamic program of matchSegs, where the end of name
// leaves any rest of the pattern to the segments below.
func matchBelow(pat, name []string) bool {
	next := make([]bool, len(name)+1) // pat exhausted: nothing left for a segment below
	cur := make([]bool, len(name)+1)
	for i := len(pat) - 1; i >= 0; i-- {
		for j := len(name); j >= 0; j-- {
			switch {
			case j == len(name):
				cur[j] = true
			case pat[i] == "**":
				cur[j] = next[j] || cur[j+1]
			default:
				ok, _ := path.Match(pat[i], name[j])
				cur[j] = ok && next[j+1]
			}
		}
		next, cur = cur, next
	}
	return next[0]
}

// normalize is Argo CD's basenameNormalized as stackd defines it: lower
// case, every character but a letter a-z or a digit turned into "-", so
// that it can name a stack.
func normalize(s string) string {
	return strings.Map(func(r rune) rune {
		r = unicode.ToLower(r)
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, s)
}

// pathParams are the path parameters of a repository-relative directory.
func pathParams(dir string) map[string]any {
	segs := strings.Split(dir, "/")
	if dir == "." || dir == "" {
		dir, segs = "", []string{}
	}
	base := path.Base(dir)
	if dir == "" {
		base = ""
	}
	s := make([]any, len(segs))
	for i, v := range segs {
		s[i] = v
	}
	return map[string]any{"path": dir, "basename": base, "basenameNormalized": normalize(base), "segments": s}
}

// walk calls visit for every entry of the checkout dir but the root and
// .git, in lexical order, descending only into directories below which
// globs may match. It opens dir as an os.Root and lists entries without
// following symbolic links: a link is visited as a link (neither a
// directory nor a regular file), so nothing outside the checkout is ever
// read.
func walk(dir string, globs []glob, visit func(p string, d fs.DirEntry) error) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open checkout: %w", err)
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return fmt.Errorf("walk checkout: %w", err)
		case p == ".":
			return nil
		case d.IsDir() && d.Name() == ".git":
			return fs.SkipDir
		}
		if err := visit(p, d); err != nil {
			return err
		}
		if d.IsDir() && !mayHold(globs, p) {
			return fs.SkipDir
		}
		return nil
	})
}

var errTooMany = errors.New("too many")

// directories yields a parameter set per directory of the checkout dir
// that globs select, sorted by path; at most maxItems.
func directories(dir string, globs []glob, maxItems int) ([]item, error) {
	var paths []string
	err := walk(dir, globs, func(p string, d fs.DirEntry) error {
		if !d.IsDir() || !selected(globs, p) {
			return nil
		}
		if len(paths) == maxItems {
			return fmt.Errorf("git: more than %d directories match: %w", maxItems, errTooMany)
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(paths)
	out := make([]item, len(paths))
	for i, p := range paths {
		out[i] = item{params: map[string]any{"path": pathParams(p)}, origin: p}
	}
	return out, nil
}
