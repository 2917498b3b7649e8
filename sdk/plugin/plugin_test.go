package plugin_test

import (
	"strings"
	"testing"

	"github.com/ledgemq/ledge/sdk/plugin"
)

func TestParams(t *testing.T) {
	p := plugin.NewParams(map[string]string{"n": "42", "f": "0.5", "b": "true", "s": "x", "bad": "?"})
	if v, err := p.Int("n", 0); err != nil || v != 42 {
		t.Errorf("Int: %v %v", v, err)
	}
	if v, err := p.Int("missing", 7); err != nil || v != 7 {
		t.Errorf("Int default: %v %v", v, err)
	}
	if _, err := p.Int("bad", 0); err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("Int of a non-number: %v", err)
	}
	if v, err := p.Float("f", 0); err != nil || v != 0.5 {
		t.Errorf("Float: %v %v", v, err)
	}
	if _, err := p.Float("bad", 0); err == nil {
		t.Errorf("Float of a non-number")
	}
	if v, err := p.Bool("b", false); err != nil || !v {
		t.Errorf("Bool: %v %v", v, err)
	}
	if _, err := p.Bool("bad", false); err == nil {
		t.Errorf("Bool of a non-boolean")
	}
	if p.String("s", "d") != "x" || p.String("missing", "d") != "d" {
		t.Errorf("String")
	}
	if _, err := p.Required("missing"); err == nil {
		t.Errorf("Required of a missing parameter")
	}
	if err := p.Only("n", "f", "b", "s", "bad"); err != nil {
		t.Errorf("Only: %v", err)
	}
	if err := p.Only("n"); err == nil || !strings.Contains(err.Error(), `unknown parameter "b"`) {
		t.Errorf("Only with unknown parameters: %v", err)
	}
	if got := strings.Join(p.Keys(), ","); got != "b,bad,f,n,s" {
		t.Errorf("Keys: %s", got)
	}
}

func TestRunChecks(t *testing.T) {
	if _, err := plugin.RunFilter(map[string]string{"prefix": "x"}); err == nil {
		t.Errorf("no records: no error")
	}
	_, err := plugin.RunFilter(map[string]string{"prefix": "x"},
		plugin.TestRecord{Offset: 5}, plugin.TestRecord{Offset: 5})
	if err == nil || !strings.Contains(err.Error(), "does not follow") {
		t.Errorf("repeated offset: %v", err)
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("a second filter registration did not panic")
		}
	}()
	plugin.RegisterBatchFilter(func(plugin.Params) (plugin.BatchFilter, error) { return nil, nil })
}

func TestNativeHelpers(t *testing.T) {
	if plugin.NativeIndex([]byte("hello"), []byte("ll")) != 2 {
		t.Errorf("NativeIndex")
	}
	if raw, ok := plugin.NativeJSONField([]byte(`{"a":{"b":"c"}}`), "a.b"); !ok || string(raw) != `"c"` {
		t.Errorf("NativeJSONField: %s %v", raw, ok)
	}
	if !plugin.JSONValueEquals([]byte(`"l\u0079on"`), "lyon") || plugin.JSONValueEquals([]byte(`"lyon"`), `"lyon"`) {
		t.Errorf("JSONValueEquals")
	}
}
