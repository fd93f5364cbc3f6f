package daemon

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The package layout docs/contributing.md describes, package by package.
const mod = "github.com/stackd/stackd/"

var (
	// leaves are the packages around the loop, each the only user of a
	// heavy dependency or a concern of its own; with their sub-packages
	// they never import each other.
	leaves = []string{"gitwatch", "runner", "store", "web", "cluster", "forge", "preview", "auth", "policy", "identity"}
	// typeFree import daemon for no type: only for the interfaces it
	// declares (and its errors), their values being model's. auth, web,
	// store and cluster were the first; every leaf is now.
	typeFree = leaves
	// shared are the words every package shares (model, which imports
	// only the spec) and the contracts between leaves (access, audit),
	// which import only the words.
	shared = []string{"daemon/model", "daemon/access", "daemon/audit"}
	// selfContained of daemon's sub-packages import nothing of stackd's;
	// onSpec import only the spec.
	selfContained = []string{"daemon/spec", "daemon/livelog", "daemon/sched", "daemon/dirwatch", "daemon/activity"}
	onSpec        = []string{"daemon/notify", "daemon/window", "daemon/review"}
	// pure are the loop's parts that work on the shared words: they import
	// the words, the spec and each other, never the loop.
	pure = []string{"daemon/scrub", "daemon/conditions", "daemon/decide", "daemon/gate", "daemon/resource",
		"daemon/resolve", "daemon/previewnow"}
	// others: the command that joins them all, the loop, the Store
	// contract's tests, the sandbox (which imports no sibling) and the
	// docs' tests.
	others = []string{"cmd/stackd", "daemon", "daemon/storetest", "sandbox", "docs"}
	// onWords are packages beside the loop that import only the shared
	// words, the spec and the scrubbing of secrets: fleet evaluates
	// StackSets' generators, reaching Git through an interface gitwatch
	// satisfies, and masks what a repository URL must not show.
	onWords = []string{"fleet"}
)

// stdDeps lists the standard packages pkg depends on, pkg included.
func stdDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// under says whether pkg is one of pkgs or a sub-package of one.
func under(pkg string, pkgs []string) bool {
	return slices.ContainsFunc(pkgs, func(p string) bool { return pkg == p || strings.HasPrefix(pkg, p+"/") })
}

// modulePackages lists the module's packages, without the module path.
func modulePackages(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		pkgs = append(pkgs, strings.TrimPrefix(p, mod))
	}
	return pkgs
}

// TestImportRules keeps the package layout docs/contributing.md describes: the
// spec is pure, the shared words import only the spec, the loop's pure
// sub-packages import nothing of the loop, the loop imports no sibling of
// stackd's but the words, and the leaves (gitwatch, runner, store, web,
// cluster, auth, …) never import each other. Every package of the module
// has a rule: a new one fails here until it is given one.
func TestImportRules(t *testing.T) {
	deps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", mod+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	forbid := func(pkg string, bad func(dep string) bool) {
		for _, dep := range deps(pkg) {
			if dep != mod+pkg && bad(dep) {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
	heavy := []string{"go.etcd.io/bbolt", "github.com/go-git/", "github.com/pulumi/", "net/http"}
	isHeavy := func(dep string) bool {
		return slices.ContainsFunc(heavy, func(h string) bool { return strings.HasPrefix(dep, h) })
	}
	ours := func(dep string) bool { return strings.HasPrefix(dep, mod) }
	for _, pkg := range modulePackages(t) {
		switch {
		case slices.Contains(selfContained, pkg):
			forbid(pkg, func(dep string) bool { return ours(dep) || isHeavy(dep) })
		case slices.Contains(onSpec, pkg):
			// notify delivers webhooks: it may use net/http.
			forbid(pkg, func(dep string) bool {
				return ours(dep) && dep != mod+"daemon/spec" || isHeavy(dep) && pkg != "daemon/notify"
			})
		case pkg == "daemon/model":
			forbid(pkg, func(dep string) bool { return ours(dep) && dep != mod+"daemon/spec" || isHeavy(dep) })
		case slices.Contains(onWords, pkg):
			forbid(pkg, func(dep string) bool {
				return ours(dep) && !slices.Contains([]string{"daemon/model", "daemon/spec", "daemon/scrub"}, strings.TrimPrefix(dep, mod)) || isHeavy(dep)
			})
		case slices.Contains(shared, pkg):
			forbid(pkg, func(dep string) bool {
				return ours(dep) && dep != mod+"daemon/model" && dep != mod+"daemon/spec" || isHeavy(dep)
			})
		case slices.Contains(pure, pkg):
			forbid(pkg, func(dep string) bool {
				return ours(dep) && dep != mod+"daemon/model" && !slices.Contains(pure, strings.TrimPrefix(dep, mod)) &&
					!slices.Contains(selfContained, strings.TrimPrefix(dep, mod)) || isHeavy(dep)
			})
		case pkg == "daemon":
			forbid(pkg, func(dep string) bool {
				return ours(dep) && !strings.HasPrefix(dep, mod+"daemon/") && dep != mod+"daemon/model"
			})
		case under(pkg, leaves):
			forbid(pkg, func(dep string) bool {
				return slices.ContainsFunc(leaves, func(l string) bool {
					return !under(pkg, []string{l}) && (dep == mod+l || strings.HasPrefix(dep, mod+l+"/"))
				})
			})
		case pkg == "sandbox":
			// Its early initializer only, which must stay before the
			// binary's other packages (see sandbox/internal/early).
			forbid(pkg, func(dep string) bool { return ours(dep) && dep != mod+"sandbox/internal/early" })
		case pkg == "sandbox/internal/early":
			// Nothing but syscall and what it needs: the packages it
			// imports initialize before it.
			base := stdDeps(t, "syscall")
			forbid(pkg, func(dep string) bool { return !slices.Contains(base, dep) })
		case pkg == "rollout":
			// The rollouts of StackSets: the daemon reaches them through
			// an interface it declares, cmd/stackd joins them; they work
			// on the words and the spec alone, their slots and records
			// being interfaces too.
			forbid(pkg, func(dep string) bool {
				return ours(dep) && dep != mod+"daemon/model" && dep != mod+"daemon/spec" || isHeavy(dep)
			})
		case pkg == "tools/testreport":
			forbid(pkg, ours)
		case slices.Contains(others, pkg):
		default:
			t.Errorf("package %s has no rule: give it one in daemon/layout_test.go and a line in docs/contributing.md", pkg)
		}
	}
	// auth needs nothing of the loop: its words are model's and access's.
	forbid("auth", func(dep string) bool { return dep == mod+"daemon" })
}

// TestLeavesImportDaemonOnlyForInterfaces: the leaves (auth, web, store,
// cluster, …) and their sub-packages name no type of daemon but the
// interfaces it declares; the values they read and write are model's.
func TestLeavesImportDaemonOnlyForInterfaces(t *testing.T) {
	fset := token.NewFileSet()
	types := map[string]bool{} // daemon's types: true for an interface
	for _, f := range parseSources(t, fset, ".") {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					ts := s.(*ast.TypeSpec)
					_, iface := ts.Type.(*ast.InterfaceType)
					types[ts.Name.Name] = iface
				}
			}
		}
	}
	for _, pkg := range modulePackages(t) {
		if !under(pkg, typeFree) {
			continue
		}
		for _, f := range parseSources(t, fset, filepath.Join("..", pkg)) {
			local := ""
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == mod+"daemon" {
					local = "daemon"
					if imp.Name != nil {
						local = imp.Name.Name
					}
				}
			}
			if local == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == local {
					if iface, isType := types[sel.Sel.Name]; isType && !iface {
						t.Errorf("%s: names the type daemon.%s; the values leaves share are model's", fset.Position(sel.Pos()), sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}

// maxLines bounds the loop's own files (DESIGN.md §1): what leaves the
// loop goes to a package whose name says what it is.
const maxLines = 4500

// TestDaemonSize fails when daemon's own non-test files pass maxLines.
func TestDaemonSize(t *testing.T) {
	n := 0
	for _, name := range sourceFiles(t) {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(data), "\n")
	}
	if n > maxLines {
		t.Errorf("daemon's non-test files hold %d lines, more than %d: move what is not the loop to a package of its own", n, maxLines)
	}
}

// TestDocMapsEveryFile: doc.go's "Where things are" names every non-test
// file of daemon but itself, and no file that is gone.
func TestDocMapsEveryFile(t *testing.T) {
	data, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, m, ok := strings.Cut(string(data), "// Where things are:")
	if !ok {
		t.Fatal(`doc.go has no "Where things are:" map`)
	}
	mapped := map[string]bool{}
	for _, f := range regexp.MustCompile(`(?m)^//\t(\S+\.go)\s`).FindAllStringSubmatch(m, -1) {
		mapped[f[1]] = true
	}
	files := sourceFiles(t)
	for _, name := range files {
		if !mapped[name] && name != "doc.go" {
			t.Errorf("doc.go's map does not name %s", name)
		}
	}
	for name := range mapped {
		if !slices.Contains(files, name) {
			t.Errorf("doc.go's map names %s, which is not a file of daemon", name)
		}
	}
}

// sourceFiles are daemon's non-test Go files.
func sourceFiles(t *testing.T) []string {
	t.Helper()
	return sourcesIn(t, ".")
}

// sourcesIn are the non-test Go files of dir.
func sourcesIn(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
}

// parseSources parses the non-test Go files of dir.
func parseSources(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	var out []*ast.File
	for _, name := range sourcesIn(t, dir) {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// TestLockRule keeps the lock rule the compiler cannot see: a locked
// (the daemon under d.mu, the receiver of what needs it) is made by lock
// alone, d.mu is taken and released by lock and unlock alone, a method of
// locked takes the lock no more (it holds it), and no goroutine uses the
// locked of the code that started it, which may have released it since:
// it takes the lock anew, or is given d.Daemon.
func TestLockRule(t *testing.T) {
	fset := token.NewFileSet()
	isLocked := func(e ast.Expr) bool { id, ok := e.(*ast.Ident); return ok && id.Name == "locked" }
	isCall := func(n ast.Node, name string) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return false
		}
		sel, ok := c.Fun.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == name
	}
	for _, f := range parseSources(t, fset, ".") {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			// The names of the locked values in fn: its receiver or
			// parameters of type locked, and what lock() returns.
			held := map[string]bool{}
			lockedRecv := false
			for _, fl := range []*ast.FieldList{fn.Recv, fn.Type.Params} {
				for _, p := range fieldsOf(fl) {
					for _, n := range p.Names {
						if isLocked(p.Type) {
							held[n.Name] = true
							lockedRecv = lockedRecv || fl == fn.Recv
						}
					}
				}
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if as, ok := n.(*ast.AssignStmt); ok && len(as.Rhs) == 1 && isCall(as.Rhs[0], "lock") {
					if id, ok := as.Lhs[0].(*ast.Ident); ok {
						held[id.Name] = true
					}
				}
				return true
			})
			var goStmts []*ast.GoStmt
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if n == nil {
					return false
				}
				pos := fset.Position(n.Pos())
				switch n := n.(type) {
				case *ast.GoStmt:
					goStmts = append(goStmts, n)
					return false // checked below
				case *ast.CompositeLit:
					if isLocked(n.Type) && fn.Name.Name != "lock" {
						t.Errorf("%s: %s makes a locked; only lock does", pos, fn.Name.Name)
					}
				case *ast.CallExpr:
					sel, _ := n.Fun.(*ast.SelectorExpr)
					if sel == nil {
						break
					}
					if mu, ok := sel.X.(*ast.SelectorExpr); ok && mu.Sel.Name == "mu" && fn.Name.Name != "lock" && fn.Name.Name != "unlock" {
						t.Errorf("%s: %s calls mu.%s; take the lock with lock() and release it with unlock()", pos, fn.Name.Name, sel.Sel.Name)
					}
					if lockedRecv && sel.Sel.Name == "lock" {
						t.Errorf("%s: %s, a method of locked, takes the lock it holds", pos, fn.Name.Name)
					}
				}
				return true
			})
			for _, g := range goStmts {
				checkGoStmt(t, fset, fn.Name.Name, g, held)
			}
		}
	}
}

// checkGoStmt fails when g refers to one of the locked values held, other
// than as its Daemon, before it declares the name anew.
func checkGoStmt(t *testing.T, fset *token.FileSet, fn string, g *ast.GoStmt, held map[string]bool) {
	t.Helper()
	own := map[string]token.Pos{}
	ast.Inspect(g, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && as.Tok == token.DEFINE {
			for _, l := range as.Lhs {
				if id, ok := l.(*ast.Ident); ok && own[id.Name] == token.NoPos {
					own[id.Name] = id.Pos()
				}
			}
		}
		return true
	})
	ast.Inspect(g, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Daemon" {
			return false // the daemon, not its lock
		}
		if id, ok := n.(*ast.Ident); ok && held[id.Name] && (own[id.Name] == token.NoPos || id.Pos() < own[id.Name]) {
			t.Errorf("%s: a goroutine started in %s uses %s, the locked of its starter: take the lock anew", fset.Position(id.Pos()), fn, id.Name)
		}
		return true
	})
}

func fieldsOf(fl *ast.FieldList) []*ast.Field {
	if fl == nil {
		return nil
	}
	return fl.List
}
