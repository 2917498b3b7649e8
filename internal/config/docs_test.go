package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The table of keys in docs/OPERATIONS.md sits between these markers and
// is exactly MarkdownTable. Regenerate it with
//
//	LEDGE_UPDATE_DOCS=1 go test ./internal/config -run TestOperationsDocHasEveryKey
const (
	tableBegin = "<!-- BEGIN CONFIG TABLE: generated from internal/config; LEDGE_UPDATE_DOCS=1 go test ./internal/config -->\n"
	tableEnd   = "<!-- END CONFIG TABLE -->"
)

func TestOperationsDocHasEveryKey(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "OPERATIONS.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, tableBegin), strings.Index(doc, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no config table between the markers %q and %q", path, tableBegin, tableEnd)
	}
	want := MarkdownTable()
	if got := doc[i+len(tableBegin) : j]; got != want {
		if os.Getenv("LEDGE_UPDATE_DOCS") != "" {
			doc = doc[:i+len(tableBegin)] + want + doc[j:]
			if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("updated the config table of %s", path)
			return
		}
		t.Errorf("the config table of %s is out of date; regenerate it with LEDGE_UPDATE_DOCS=1 go test ./internal/config\nwant:\n%s", path, want)
	}
}
