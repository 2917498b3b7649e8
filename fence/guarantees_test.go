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
// listed test exists and declares that it covers the guarantee, and every
// declaration names a guarantee of the table and is listed there.
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
