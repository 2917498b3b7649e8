package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/OPERATIONS.md carries two parts generated from the keys, each
// between its markers: the table of every key and a file with every key
// at its default. Regenerate them with
//
//	LEDGE_UPDATE_DOCS=1 go test ./internal/config -run TestOperationsDoc
const (
	tableBegin = "<!-- BEGIN CONFIG TABLE: generated from internal/config; LEDGE_UPDATE_DOCS=1 go test ./internal/config -->\n"
	tableEnd   = "<!-- END CONFIG TABLE -->"
	yamlBegin  = "<!-- BEGIN DEFAULT CONFIG: generated from internal/config; LEDGE_UPDATE_DOCS=1 go test ./internal/config -->\n"
	yamlEnd    = "<!-- END DEFAULT CONFIG -->"
)

func TestOperationsDocHasEveryKey(t *testing.T) {
	checkGenerated(t, "config table", tableBegin, tableEnd, MarkdownTable())
}

// The file "with every key at its default" has every key, at its
// default: a key added to the code and not to the doc fails here.
func TestOperationsDocDefaultConfigHasEveryKey(t *testing.T) {
	checkGenerated(t, "default configuration", yamlBegin, yamlEnd, "```yaml\n"+DefaultYAML()+"```\n")
}

// checkGenerated checks that docs/OPERATIONS.md holds want between begin
// and end, and writes it there under LEDGE_UPDATE_DOCS.
func checkGenerated(t *testing.T, what, begin, end, want string) {
	t.Helper()
	path := filepath.Join("..", "..", "docs", "OPERATIONS.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %s between the markers %q and %q", path, what, begin, end)
	}
	if got := doc[i+len(begin) : j]; got != want {
		if os.Getenv("LEDGE_UPDATE_DOCS") != "" {
			doc = doc[:i+len(begin)] + want + doc[j:]
			if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("updated the %s of %s", what, path)
			return
		}
		t.Errorf("the %s of %s is out of date; regenerate it with LEDGE_UPDATE_DOCS=1 go test ./internal/config\nwant:\n%s", what, path, want)
	}
}

// The default file reads back as the defaults.
func TestDefaultYAMLReadsBackAsTheDefaults(t *testing.T) {
	path := writeFile(t, DefaultYAML())
	fromFile, err := load(t, []string{"--config", path}, nil)
	if err != nil {
		t.Fatalf("the default file does not load: %v\n%s", err, DefaultYAML())
	}
	defaults, err := load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range Keys() {
		if got, want := k.get(fromFile), k.get(defaults); got != want {
			t.Errorf("%s from the default file is %q, the default %q", k.Name, got, want)
		}
	}
}
