package main

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// "ledge plugin init" writes a plugin project from the templates embedded
// below; "ledge plugin build" builds one; "ledge plugin test" with a
// project directory runs its module on its sample records and checks the
// verdicts they expect (plugin.go).

//go:embed all:plugintemplates
var pluginTemplates embed.FS

// projectFile is the manifest that marks a plugin project.
const projectFile = "ledge-plugin.json"

// pluginProject is the content of a project's manifest.
type pluginProject struct {
	Name   string            `json:"name"`
	Kind   string            `json:"kind"`   // filter, commit-policy or transform
	Lang   string            `json:"lang"`   // go, assemblyscript or wat
	Wasm   string            `json:"wasm"`   // the module build writes, relative to the project
	Input  string            `json:"input"`  // the sample records, relative to the project
	Params map[string]string `json:"params"` // the parameters the sample records are tested with

	dir string
}

var pluginLangs = map[string]string{"go": "Go", "assemblyscript": "AssemblyScript", "wat": "WebAssembly text"}

func newPluginInitCommand() *cobra.Command {
	var kind, lang, dir string
	cmd := &cobra.Command{
		Use:   "init NAME --kind filter|commit-policy|transform --lang go|assemblyscript|wat",
		Short: "Write a new plugin project: source, sample records with expected verdicts, a README",
		Long: `Write a small plugin project in ./NAME (or --dir): its source, sample records
with the verdicts they must get (records.jsonl), a README and the manifest
ledge-plugin.json that "ledge plugin build" and "ledge plugin test" read.

The filter keeps the records whose JSON value has the member "field"
equal to "equals"; the commit policy commits through the last record of a
poll whose value contains "marker". Both decide a poll with one call into
the node's native matchers, so they cost little; change them at will. The
transform outputs every record unchanged (its sample records list the
outputs each must give): a starting point that visibly flows.

The project carries the plugin kit of this binary, so it builds with no
network and no checkout of Ledge, against the ABI of the node that wrote it.
Languages and what building needs:
  go              Go. The kit (github.com/ledgemq/ledge/sdk/plugin and the
                  ABI package it imports) is written to ledge-sdk/, and
                  go.mod replaces the module with it. Inside a checkout of
                  Ledge (or with LEDGE_SOURCE=DIR) go.mod replaces it with
                  that checkout instead.
  assemblyscript  node and npm. The kit is assembly/ledge.ts: typed records,
                  parameters, verdicts, proposals. The compiler comes from
                  npm: the first "ledge plugin build" runs the project's own
                  "npm install", the only step that needs the network.
  wat             wat2wasm (Debian: apt-get install wabt). The source names
                  the ABI's offsets.

The project's README gives the next commands, run from its directory.`,
		Example: `  ledge plugin init only-errors --kind filter --lang go
  ledge plugin init checkpoint --kind commit-policy --lang assemblyscript
  ledge plugin init enrich --kind transform --lang go
  ledge plugin init prefix --kind filter --lang wat --dir plugins/prefix`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := newProject(args[0], kind, lang)
			if err != nil {
				return err
			}
			if dir == "" {
				dir = p.Name
			}
			if err := p.write(dir); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			article := "a"
			if p.Lang == "assemblyscript" {
				article = "an"
			}
			fmt.Fprintf(out, "wrote %s %s %s project in %s\n", article, pluginLangs[p.Lang], kindWords(p.Kind), dir)
			// The same commands, from the same directory, as the
			// project's README.
			fmt.Fprintf(out, "next: cd %s && ledge plugin build && ledge plugin test && ledge plugin add %s %s --kind %s\n",
				shellQuote(dir), p.Name, p.Wasm, p.Kind)
			if p.Lang == "assemblyscript" {
				fmt.Fprintln(out, "(the first build runs npm install for the AssemblyScript compiler: the only step that needs the network)")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "filter", "plugin kind: filter, commit-policy or transform")
	cmd.Flags().StringVar(&lang, "lang", "go", "language: go, assemblyscript or wat")
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write (default ./NAME); it must not exist or be empty")
	return cmd
}

func kindWords(kind string) string {
	if kind == "commit-policy" {
		return "commit policy"
	}
	return kind
}

// newProject checks the name, kind and language of a new project.
func newProject(name, kind, lang string) (*pluginProject, error) {
	if !validPluginName(name) {
		return nil, fmt.Errorf("%q cannot name a plugin: use 1 to 255 letters, digits, '.', '_' and '-'", name)
	}
	if kind != "filter" && kind != "commit-policy" && kind != "transform" {
		return nil, fmt.Errorf("--kind %q is not a plugin kind: use filter, commit-policy or transform", kind)
	}
	if _, ok := pluginLangs[lang]; !ok {
		return nil, fmt.Errorf("--lang %q is not a language the templates cover: use go, assemblyscript or wat", lang)
	}
	p := &pluginProject{Name: name, Kind: kind, Lang: lang, Wasm: name + ".wasm", Input: "records.jsonl"}
	switch kind {
	case "filter":
		p.Params = map[string]string{"field": "level", "equals": "error"}
	case "commit-policy":
		p.Params = map[string]string{"marker": "checkpoint"}
	default:
		p.Params = map[string]string{}
	}
	return p, nil
}

// validPluginName is the node's rule for plugin names.
func validPluginName(name string) bool {
	if name == "" || len(name) > 255 {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// templateData is what the templates see.
type templateData struct {
	*pluginProject
	LangName    string
	GoVersion   string
	LedgeSource string // the replace target of github.com/ledgemq/ledge (Go)
}

// write renders the project's templates into dir.
func (p *pluginProject) write(dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s already exists and is not empty: choose another NAME or --dir", dir)
	}
	data := templateData{pluginProject: p, LangName: pluginLangs[p.Lang], GoVersion: "1.26.0"}
	if p.Lang == "go" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		data.LedgeSource, data.GoVersion = ledgeSource(abs)
		if data.LedgeSource == "" {
			data.LedgeSource = "./" + kitDir
		}
	}
	files := map[string]string{} // project path -> template path
	for _, from := range []string{"common/" + p.Kind, p.Lang, p.Lang + "/" + p.Kind} {
		entries, err := fs.ReadDir(pluginTemplates, "plugintemplates/"+from)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			files[projectPath(p, e.Name())] = "plugintemplates/" + from + "/" + e.Name()
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	shared, err := fs.ReadFile(pluginTemplates, "plugintemplates/common/kit.tmpl")
	if err != nil {
		return err
	}
	for to, from := range files {
		text, err := fs.ReadFile(pluginTemplates, from)
		if err != nil {
			return err
		}
		out, err := renderTemplate(from, string(shared), string(text), data.values())
		if err != nil {
			return err
		}
		to = filepath.Join(dir, filepath.FromSlash(to))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(to, []byte(out), 0o644); err != nil {
			return err
		}
	}
	if err := p.writeKit(dir, data); err != nil {
		return err
	}
	manifest, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, projectFile), append(manifest, '\n'), 0o644)
}

// projectPath maps a template's file name to its place in the project.
func projectPath(p *pluginProject, name string) string {
	name = strings.TrimSuffix(name, ".tmpl")
	switch {
	case name == "plugin.wat":
		return p.Name + ".wat"
	case name == "index.ts":
		return "assembly/index.ts"
	case name == "gitignore":
		return ".gitignore"
	}
	return name
}

// ledgeSource finds the checkout of Ledge a Go project should build
// against: LEDGE_SOURCE, or a directory above dir whose go.mod is Ledge's.
// It returns the path for a replace directive (relative when found above
// dir) and the checkout's Go version, or "" and a default.
func ledgeSource(dir string) (replace, goVersion string) {
	goVersion = "1.26.0"
	check := func(root string) bool {
		mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
		if err != nil || !bytes.HasPrefix(mod, []byte("module github.com/ledgemq/ledge\n")) {
			return false
		}
		for _, line := range strings.Split(string(mod), "\n") {
			if v, ok := strings.CutPrefix(line, "go "); ok {
				goVersion = strings.TrimSpace(v)
			}
		}
		return true
	}
	if env := os.Getenv("LEDGE_SOURCE"); env != "" {
		if abs, err := filepath.Abs(env); err == nil && check(abs) {
			return filepath.ToSlash(abs), goVersion
		}
	}
	for up := filepath.Dir(dir); ; up = filepath.Dir(up) {
		if check(up) {
			rel, err := filepath.Rel(dir, up)
			if err != nil {
				return filepath.ToSlash(up), goVersion
			}
			return filepath.ToSlash(rel), goVersion
		}
		if filepath.Dir(up) == up {
			return "", goVersion
		}
	}
}

// loadProject reads the manifest of the project in dir.
func loadProject(dir string) (*pluginProject, error) {
	b, err := os.ReadFile(filepath.Join(dir, projectFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s is not a plugin project (no %s): create one with ledge plugin init NAME", dir, projectFile)
	}
	if err != nil {
		return nil, err
	}
	var p pluginProject
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: %v", filepath.Join(dir, projectFile), err)
	}
	if _, ok := pluginLangs[p.Lang]; !ok || p.Wasm == "" || p.Name == "" {
		return nil, fmt.Errorf("%s: name, wasm and lang (go, assemblyscript or wat) are required", filepath.Join(dir, projectFile))
	}
	if path.IsAbs(p.Wasm) || strings.Contains(p.Wasm, "..") {
		return nil, fmt.Errorf("%s: wasm must be a path inside the project", filepath.Join(dir, projectFile))
	}
	p.dir = dir
	return &p, nil
}

// wasmPath and inputPath are the project's module and sample records.
func (p *pluginProject) wasmPath() string  { return filepath.Join(p.dir, p.Wasm) }
func (p *pluginProject) inputPath() string { return filepath.Join(p.dir, p.Input) }
