package plugin_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/sdk/plugin"
)

// The kit's transform under test: a flat-map that outputs each record
// "times" times (a "drop" value: none, a filter-map), tags each output,
// and keeps in its state the number of records seen so far.
func init() {
	plugin.RegisterTransform(func(p plugin.Params) (plugin.Transform, error) {
		times, err := p.Int("times", 1)
		if err != nil {
			return nil, err
		}
		return func(b *plugin.Batch, s *plugin.State, out *plugin.Output) error {
			seen := 0
			if st := s.Bytes(); len(st) > 0 {
				if _, err := fmt.Sscan(string(st), &seen); err != nil {
					return fmt.Errorf("state %q: %v", st, err)
				}
			}
			for i := 0; i < b.Len(); i++ {
				r := b.Record(i)
				switch string(r.Value()) {
				case "drop":
				case "fail":
					return fmt.Errorf("record %d asks to fail", r.Offset())
				case "pass":
					out.Pass(i)
				case "upper":
					v := r.Value() // changed in place: Pass would not see it
					copy(v, "UPPER")
					out.Emit(i, r.Key(), v)
					out.EmitValue(i, []byte("new"))
				case "wrap":
					out.EmitValueParts(i, []byte("<"), r.Value(), nil, []byte(">"))
					out.EmitValueParts(i)
				case "back":
					out.Emit(i, nil, nil)
					out.Emit(i-1, nil, nil)
				default:
					for j := int64(0); j < times; j++ {
						out.EmitAt(i, r.Timestamp()+j, r.Key(), append([]byte("v:"), r.Value()...),
							plugin.Header{Key: []byte("n"), Value: []byte(fmt.Sprint(j))})
					}
				}
			}
			s.Set([]byte(fmt.Sprint(seen + b.Len())))
			return nil
		}, nil
	})
}

func showTest(outs []plugin.TestOutput) string {
	var b strings.Builder
	for _, o := range outs {
		fmt.Fprintf(&b, "%d@%d %q=%q", o.Input, o.Timestamp, o.Key, o.Value)
		for _, h := range o.Headers {
			fmt.Fprintf(&b, " [%s:%q]", h.Key, h.Value)
		}
		b.WriteString("; ")
	}
	return b.String()
}

func TestRunTransform(t *testing.T) {
	recs := []plugin.TestRecord{
		{Offset: 5, Timestamp: 100, Key: []byte("k"), Value: []byte("a")},
		{Offset: 6, Timestamp: 200, Value: []byte("drop")},
		{Offset: 7, Timestamp: 300, Key: []byte("p"), Value: []byte("pass"),
			Headers: []plugin.TestHeader{{Key: "h", Value: nil}, {Key: "i", Value: []byte("1")}}},
	}
	outs, state, err := plugin.RunTransform(map[string]string{"times": "2"}, nil, recs...)
	if err != nil {
		t.Fatal(err)
	}
	want := `0@100 "k"="v:a" [n:"0"]; 0@101 "k"="v:a" [n:"1"]; 2@300 "p"="pass" [h:""] [i:"1"]; `
	if got := showTest(outs); got != want || string(state) != "3" {
		t.Fatalf("outputs %s state %q\nwant %s state \"3\"", got, state, want)
	}
	if outs[2].Headers[0].Value != nil {
		t.Error("a null header value passed through as empty")
	}
	// An input changed in place is copied by Emit; EmitValue keeps the
	// input's key and headers as the host gave them.
	outs, _, err = plugin.RunTransform(nil, nil, plugin.TestRecord{Key: []byte("k"), Value: []byte("upper"),
		Headers: []plugin.TestHeader{{Key: "h", Value: []byte("1")}}})
	if got, want := showTest(outs), `0@0 "k"="UPPER"; 0@0 "k"="new" [h:"1"]; `; err != nil || got != want {
		t.Errorf("in place: %s %v, want %s", got, err, want)
	}
	// A value in parts is joined; no parts is an empty value, not null.
	outs, _, err = plugin.RunTransform(nil, nil, plugin.TestRecord{Key: []byte("k"), Value: []byte("wrap"),
		Headers: []plugin.TestHeader{{Key: "h", Value: []byte("1")}}})
	if got, want := showTest(outs), `0@0 "k"="<wrap>" [h:"1"]; 0@0 "k"="" [h:"1"]; `; err != nil || got != want || outs[1].Value == nil {
		t.Errorf("parts: %s %v, want %s", got, err, want)
	}
	// The state carries to the next batch.
	_, state, err = plugin.RunTransform(nil, state, plugin.Values("x", "y")...)
	if err != nil || string(state) != "5" {
		t.Fatalf("second batch: state %q, %v", state, err)
	}
	// An error fails the batch with its message.
	if _, _, err := plugin.RunTransform(nil, nil, plugin.Values("fail")...); err == nil || !strings.Contains(err.Error(), "asks to fail") {
		t.Errorf("a failing batch: %v", err)
	}
	if _, _, err := plugin.RunTransform(map[string]string{"times": "x"}, nil, plugin.Values("a")...); err == nil {
		t.Error("a bad parameter was accepted")
	}
}

// Outputs follow the inputs' order: the kit refuses to go back.
func TestOutputOrder(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "after one from input 1") {
			t.Errorf("an output from an earlier record after a later one: %v", r)
		}
	}()
	_, _, _ = plugin.RunTransform(nil, nil, plugin.Values("a", "back")...)
}
