package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// The plugin kit's templates are rendered by the small renderer below,
// not by text/template: text/template looks methods up by name at run
// time, and a binary that links it keeps every exported method of every
// type it links, about 5.5 MB of the stripped ledge binary. The renderer
// reads the subset of text/template's syntax the templates use, with the
// same meaning (plugin_render_test.go renders every template both ways
// and compares):
//
//	{{.Field}}                      a value of the data
//	{{if eq .Field "v"}} … {{else if eq .Field "w"}} … {{else}} … {{end}}
//	{{define "name"}} … {{end}}     a named block (kit.tmpl)
//	{{template "name" .}}           the named block, with the same data
//	{{- …}}, {{… -}}                trim the white space before, after
//
// Anything else is an error, as is a field the data lacks.

// renderTemplate renders text, with the blocks defined in shared, from
// the values of data.
func renderTemplate(name, shared, text string, data map[string]string) (string, error) {
	p := &tmplParser{name: name, defs: map[string][]tmplNode{}}
	for _, src := range []string{shared, text} {
		toks, err := lexTemplate(src)
		if err != nil {
			return "", fmt.Errorf("template %s: %w", name, err)
		}
		p.toks, p.pos = toks, 0
		body, stop, err := p.list()
		if err != nil {
			return "", err
		}
		if stop != "" {
			return "", fmt.Errorf("template %s: unexpected {{%s}}", name, stop)
		}
		p.top = body
	}
	var b strings.Builder
	if err := p.render(&b, p.top, data, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

// tmplToken is a run of literal text or the inside of one {{action}}.
type tmplToken struct {
	text   string
	action bool
}

// lexTemplate splits src into text and actions, applying the trim
// markers to the text beside them.
func lexTemplate(src string) ([]tmplToken, error) {
	var toks []tmplToken
	trimNext := false
	for {
		i := strings.Index(src, "{{")
		if i < 0 {
			toks = appendText(toks, src, trimNext)
			return toks, nil
		}
		text := src[:i]
		src = src[i+2:]
		j := strings.Index(src, "}}")
		if j < 0 {
			return nil, fmt.Errorf("unclosed action")
		}
		act := src[:j]
		src = src[j+2:]
		if strings.HasPrefix(act, "- ") {
			text = strings.TrimRightFunc(text, unicode.IsSpace)
			act = act[2:]
		}
		toks = appendText(toks, text, trimNext)
		trimNext = strings.HasSuffix(act, " -")
		if trimNext {
			act = act[:len(act)-2]
		}
		toks = append(toks, tmplToken{text: strings.TrimSpace(act), action: true})
	}
}

func appendText(toks []tmplToken, text string, trimLeft bool) []tmplToken {
	if trimLeft {
		text = strings.TrimLeftFunc(text, unicode.IsSpace)
	}
	if text == "" {
		return toks
	}
	return append(toks, tmplToken{text: text})
}

// tmplNode is literal text, a field, a call of a named block, or a
// conditional with its branches.
type tmplNode struct {
	text     string
	field    string
	call     string
	branches []tmplBranch
}

// tmplBranch is one arm of a conditional: taken when data[field] ==
// value, or always (an else).
type tmplBranch struct {
	field, value string
	always       bool
	body         []tmplNode
}

type tmplParser struct {
	name string
	toks []tmplToken
	pos  int
	defs map[string][]tmplNode
	top  []tmplNode
}

// list parses nodes up to the end of input or an {{end}} or {{else…}},
// which it returns.
func (p *tmplParser) list() ([]tmplNode, string, error) {
	var nodes []tmplNode
	for p.pos < len(p.toks) {
		t := p.toks[p.pos]
		p.pos++
		if !t.action {
			nodes = append(nodes, tmplNode{text: t.text})
			continue
		}
		act := t.text
		switch {
		case act == "end" || act == "else" || strings.HasPrefix(act, "else if "):
			return nodes, act, nil
		case strings.HasPrefix(act, "."):
			nodes = append(nodes, tmplNode{field: act[1:]})
		case strings.HasPrefix(act, "if "):
			n, err := p.conditional(act[len("if "):])
			if err != nil {
				return nil, "", err
			}
			nodes = append(nodes, n)
		case strings.HasPrefix(act, "define "):
			name, err := p.blockName(act[len("define "):], "")
			if err != nil {
				return nil, "", err
			}
			body, stop, err := p.list()
			if err != nil {
				return nil, "", err
			}
			if stop != "end" {
				return nil, "", fmt.Errorf("template %s: define %q ends with {{%s}}", p.name, name, stop)
			}
			p.defs[name] = body
		case strings.HasPrefix(act, "template "):
			name, err := p.blockName(act[len("template "):], " .")
			if err != nil {
				return nil, "", err
			}
			nodes = append(nodes, tmplNode{call: name})
		default:
			return nil, "", fmt.Errorf("template %s: unsupported action {{%s}}", p.name, act)
		}
	}
	return nodes, "", nil
}

// conditional parses an if's arms, cond being the first one's condition.
func (p *tmplParser) conditional(cond string) (tmplNode, error) {
	var n tmplNode
	for {
		br, err := p.condition(cond)
		if err != nil {
			return n, err
		}
		body, stop, err := p.list()
		if err != nil {
			return n, err
		}
		br.body = body
		n.branches = append(n.branches, br)
		switch {
		case stop == "end":
			return n, nil
		case stop == "else":
			body, stop, err := p.list()
			if err != nil {
				return n, err
			}
			if stop != "end" {
				return n, fmt.Errorf("template %s: else ends with {{%s}}", p.name, stop)
			}
			n.branches = append(n.branches, tmplBranch{always: true, body: body})
			return n, nil
		case strings.HasPrefix(stop, "else if "):
			cond = stop[len("else if "):]
		default:
			return n, fmt.Errorf("template %s: unclosed if", p.name)
		}
	}
}

// condition parses `eq .Field "value"`.
func (p *tmplParser) condition(cond string) (tmplBranch, error) {
	f := strings.SplitN(cond, " ", 3)
	if len(f) != 3 || f[0] != "eq" || !strings.HasPrefix(f[1], ".") {
		return tmplBranch{}, fmt.Errorf("template %s: unsupported condition %q", p.name, cond)
	}
	v, err := strconv.Unquote(f[2])
	if err != nil {
		return tmplBranch{}, fmt.Errorf("template %s: condition %q: %w", p.name, cond, err)
	}
	return tmplBranch{field: f[1][1:], value: v}, nil
}

// blockName reads a quoted block name followed by suffix.
func (p *tmplParser) blockName(s, suffix string) (string, error) {
	s, ok := strings.CutSuffix(s, suffix)
	name, err := strconv.Unquote(s)
	if !ok || err != nil {
		return "", fmt.Errorf("template %s: bad block name in %q", p.name, s)
	}
	return name, nil
}

func (p *tmplParser) render(b *strings.Builder, nodes []tmplNode, data map[string]string, depth int) error {
	if depth > 8 {
		return fmt.Errorf("template %s: blocks nest too deep", p.name)
	}
	for _, n := range nodes {
		switch {
		case n.field != "":
			v, ok := data[n.field]
			if !ok {
				return fmt.Errorf("template %s: no value for .%s", p.name, n.field)
			}
			b.WriteString(v)
		case n.call != "":
			body, ok := p.defs[n.call]
			if !ok {
				return fmt.Errorf("template %s: no block %q", p.name, n.call)
			}
			if err := p.render(b, body, data, depth+1); err != nil {
				return err
			}
		case n.branches != nil:
			for _, br := range n.branches {
				if !br.always {
					v, ok := data[br.field]
					if !ok {
						return fmt.Errorf("template %s: no value for .%s", p.name, br.field)
					}
					if v != br.value {
						continue
					}
				}
				if err := p.render(b, br.body, data, depth+1); err != nil {
					return err
				}
				break
			}
		default:
			b.WriteString(n.text)
		}
	}
	return nil
}

// values is what the templates see of d.
func (d templateData) values() map[string]string {
	return map[string]string{
		"Name": d.Name, "Kind": d.Kind, "Lang": d.Lang, "Wasm": d.Wasm, "Input": d.Input,
		"LangName": d.LangName, "GoVersion": d.GoVersion, "LedgeSource": d.LedgeSource,
	}
}
