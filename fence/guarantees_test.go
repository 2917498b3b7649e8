package fence

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	// A guarantee row of docs/FENCING.md: | G7 | text | covered by |
	guaranteeRow = regexp.MustCompile(`^\|\s*(G\d+)\s*\|(.*)\|([^|]*)\|\s*$`)
	// A coverage declaration: a comment line in a test's doc comment
	// (Go) or a line of a data-driven file (#).
	coversLine = regexp.MustCompile(`^\s*(?://|#)\s*covers:((?:\s+G\d+)+)\s*$`)
)

// TestGuaranteesAreCovered keeps docs/FENCING.md's guarantee table and the
// tests honest with each other: every guarantee has covering tests, every
// listed test exists, really runs (notRun) and declares that it covers
// the guarantee, and every declaration names a guarantee of the table and
// is listed there.
func TestGuaranteesAreCovered(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	doc := readGuarantees(t, filepath.Join(root, "docs", "FENCING.md"))
	declared := declaredCoverage(t, root)

	for id, refs := range doc {
		if len(refs) == 0 {
			t.Errorf("%s has no covering test in docs/FENCING.md", id)
		}
		for _, ref := range refs {
			ids, ok := declared[ref]
			switch {
			case !ok:
				t.Errorf("%s lists %s, which does not exist or declares no coverage", id, ref)
			case !slices.Contains(ids, id):
				t.Errorf("%s lists %s, which does not declare covers: %s", id, ref, id)
			}
		}
	}
	lits := map[string]map[string]bool{} // a package's test literals, by directory
	for _, refs := range doc {
		for _, ref := range refs {
			if why := notRun(t, root, ref, lits); why != "" {
				t.Errorf("%s is listed as coverage but %s", ref, why)
			}
		}
	}
	for ref, ids := range declared {
		for _, id := range ids {
			refs, ok := doc[id]
			switch {
			case !ok:
				t.Errorf("%s declares covers: %s, which docs/FENCING.md does not define", ref, id)
			case !slices.Contains(refs, ref):
				t.Errorf("%s declares covers: %s but docs/FENCING.md does not list it there", ref, id)
			}
		}
	}
}

// readGuarantees returns the guarantee ids of the doc's table with the
// tests each lists ("pkg/dir.TestName" or a testdata path).
func readGuarantees(t *testing.T, path string) map[string][]string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := guaranteeRow.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if _, dup := out[m[1]]; dup {
			t.Errorf("%s is defined twice", m[1])
		}
		refs := []string{}
		for _, r := range strings.Split(m[3], ",") {
			if r = strings.TrimSpace(r); r != "" {
				refs = append(refs, r)
			}
		}
		out[m[1]] = refs
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no guarantees found in docs/FENCING.md")
	}
	return out
}

// declaredCoverage scans the repository's test files and testdata files
// for coverage declarations, keyed like the doc's references.
func declaredCoverage(t *testing.T, root string) map[string][]string {
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		switch {
		case strings.HasSuffix(path, "_test.go"):
			scanGoTest(t, path, filepath.ToSlash(filepath.Dir(rel)), out)
		case strings.Contains(rel, "/testdata/"):
			if ids := scanTestdata(t, path); len(ids) > 0 {
				out[rel] = ids
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func scanGoTest(t *testing.T, path, dir string, out map[string][]string) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	onFuncs := map[*ast.CommentGroup]string{}
	for _, decl := range f.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok && fn.Doc != nil && fn.Recv == nil {
			onFuncs[fn.Doc] = fn.Name.Name
		}
	}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			m := coversLine.FindStringSubmatch(c.Text)
			if m == nil {
				continue
			}
			name, ok := onFuncs[cg]
			if !ok {
				t.Errorf("%s: a covers declaration must be in a test function's doc comment", fset.Position(c.Pos()))
				continue
			}
			key := dir + "." + name
			out[key] = append(out[key], strings.Fields(m[1])...)
		}
	}
}

func scanTestdata(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range strings.Split(string(b), "\n") {
		if m := coversLine.FindStringSubmatch(line); m != nil {
			ids = append(ids, strings.Fields(m[1])...)
		}
	}
	return ids
}

// notRun says why a listed test does not really run, or "" if it does:
// a Go test whose body begins by skipping itself covers nothing, and a
// data-driven file counts only if a test of its package names it (its
// path under the package, its name beside a "testdata/" prefix, or the
// directory it walks).
func notRun(t *testing.T, root, ref string, cache map[string]map[string]bool) string {
	if i := strings.Index(ref, "/testdata/"); i >= 0 {
		pkg, rel := ref[:i], ref[i+1:]
		lits, ok := cache[pkg]
		if !ok {
			lits = testLiterals(t, filepath.Join(root, filepath.FromSlash(pkg)))
			cache[pkg] = lits
		}
		dir, name := filepath.ToSlash(filepath.Dir(rel)), filepath.Base(rel)
		if lits[rel] || lits[dir] || (lits[name] && lits["testdata/"]) {
			return ""
		}
		return "no test of " + pkg + " runs it"
	}
	i := strings.LastIndex(ref, ".")
	if i < 0 {
		return ""
	}
	dir, name := ref[:i], ref[i+1:]
	key := "funcs:" + dir
	skips, ok := cache[key]
	if !ok {
		skips = testSkips(t, filepath.Join(root, filepath.FromSlash(dir)))
		cache[key] = skips
	}
	if skips[name] {
		return "it skips itself"
	}
	return "" // a missing test is reported by TestGuaranteesAreCovered
}

// testSkips returns, for each test function of the test files in dir,
// whether its body begins by skipping it.
func testSkips(t *testing.T, dir string) map[string]bool {
	out := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	for _, path := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Body != nil {
				out[fn.Name.Name] = len(fn.Body.List) > 0 && isSkip(fn.Body.List[0])
			}
		}
	}
	return out
}

// isSkip reports whether st is a call of t.Skip, t.Skipf or t.SkipNow.
func isSkip(st ast.Stmt) bool {
	es, ok := st.(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && strings.HasPrefix(sel.Sel.Name, "Skip")
}

// testLiterals returns the string literals of the test files in dir.
func testLiterals(t *testing.T, dir string) map[string]bool {
	out := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	for _, path := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil {
					out[v] = true
				}
			}
			return true
		})
	}
	return out
}
