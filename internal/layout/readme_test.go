package layout_test

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeNamesEveryPackage: the README's Layout has a line for every
// package of the module, so that a new package is explained where a
// newcomer looks first. Test support of node's packages (…test) is named
// by one line, and the plugin kit's examples by the kit's.
func TestReadmeNamesEveryPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	readme, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "## Layout\n")
	if !ok {
		t.Fatal("README.md has no Layout section")
	}
	_, block, _ := strings.Cut(layout, "```\n")
	block, _, _ = strings.Cut(block, "```")
	named := map[string]bool{}
	for _, line := range strings.Split(block, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			named[strings.TrimSuffix(f[0], "/")] = true
		}
	}
	for _, p := range goList(t) {
		dir := rel(p.ImportPath)
		switch {
		case named[dir]:
		case strings.HasPrefix(dir, "node/") && strings.HasSuffix(path.Base(dir), "test") && named["node/*/…test"]:
		case strings.HasPrefix(dir, "sdk/plugin/examples/") && named["sdk/plugin"]:
		default:
			t.Errorf("README.md's Layout does not name %s", dir)
		}
	}
}
