package main

import (
	"io/fs"
	"strings"
	"testing"
	"text/template"
)

// TestRenderTemplateMatchesTextTemplate renders every template of the
// kit, for every kind, language and source of the plugin kit, with the
// small renderer ledge links and with text/template, and wants the same
// bytes.
func TestRenderTemplateMatchesTextTemplate(t *testing.T) {
	shared, err := fs.ReadFile(pluginTemplates, "plugintemplates/common/kit.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	err = fs.WalkDir(pluginTemplates, "plugintemplates", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".tmpl") && !strings.HasSuffix(p, "/kit.tmpl") {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil || len(paths) < 10 {
		t.Fatalf("templates: %d found, %v", len(paths), err)
	}
	var checked int
	for _, kind := range []string{"filter", "commit-policy", "transform"} {
		for lang := range pluginLangs {
			for _, src := range []string{"./ledge-sdk", "/home/dev/ledge"} {
				data := templateData{
					pluginProject: &pluginProject{Name: "demo", Kind: kind, Lang: lang, Wasm: "demo.wasm", Input: "records.jsonl"},
					LangName:      pluginLangs[lang], GoVersion: "1.26.0", LedgeSource: src,
				}
				for _, p := range paths {
					text, err := fs.ReadFile(pluginTemplates, p)
					if err != nil {
						t.Fatal(err)
					}
					want := execTextTemplate(t, p, string(shared), string(text), data)
					got, err := renderTemplate(p, string(shared), string(text), data.values())
					if err != nil {
						t.Fatalf("%s (%s, %s, %s): %v", p, kind, lang, src, err)
					}
					if got != want {
						t.Fatalf("%s (%s, %s, %s): renders\n%s\ntext/template renders\n%s", p, kind, lang, src, got, want)
					}
					checked++
				}
			}
		}
	}
	t.Logf("%d renderings agree", checked)
}

func execTextTemplate(t *testing.T, name, shared, text string, data templateData) string {
	t.Helper()
	tm := template.Must(template.New(name).Option("missingkey=error").Parse(shared))
	tm = template.Must(tm.Parse(text))
	var b strings.Builder
	if err := tm.Execute(&b, data); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestRenderTemplateRefusesWhatItDoesNotKnow: a field the data lacks, an
// action outside the subset and an unclosed if are errors, not output.
func TestRenderTemplateRefusesWhatItDoesNotKnow(t *testing.T) {
	data := map[string]string{"Name": "demo"}
	for _, text := range []string{
		"{{.Missing}}",
		"{{range .Name}}x{{end}}",
		"{{if eq .Name \"demo\"}}open",
		"{{if ne .Name \"x\"}}y{{end}}",
		"{{template \"nowhere\" .}}",
		"{{.Name",
		"{{end}}",
	} {
		if out, err := renderTemplate("t", "", text, data); err == nil {
			t.Errorf("%q rendered %q, want an error", text, out)
		}
	}
	out, err := renderTemplate("t", `{{define "k"}}<{{.Name}}>{{end}}`, "a {{- template \"k\" .}} \n {{- if eq .Name \"x\"}}x{{else if eq .Name \"demo\"}}d{{else}}e{{end}}", data)
	if err != nil || out != "a<demo>d" {
		t.Fatalf("got %q, %v; want %q", out, err, "a<demo>d")
	}
}
