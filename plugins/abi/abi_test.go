package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestRegionRoundTrip(t *testing.T) {
	var e Encoder
	e.Reset(Meta{Topic: "sensors", Partition: 7, From: 99, Next: 105})
	e.Add(100, 1700000000000, []byte("k1"), []byte("v1"))
	e.AddHeader("checkpoint", []byte("yes"))
	e.AddHeader("null", nil)
	e.Add(102, -5, nil, []byte{})
	e.Add(104, 0, []byte{}, nil)
	e.AddHeader("h", []byte("x"))
	region := e.AppendRegion([]byte("prefix"))[len("prefix"):]
	if len(region) != e.Size() || len(region)%8 != 0 {
		t.Fatalf("region of %d bytes, Size %d", len(region), e.Size())
	}
	v, err := Parse(region)
	if err != nil {
		t.Fatal(err)
	}
	if v.Len() != 3 || v.From() != 99 || v.Next() != 105 || v.Partition() != 7 || string(v.Topic()) != "sensors" {
		t.Fatalf("header: %d records [%d, %d) p%d %q", v.Len(), v.From(), v.Next(), v.Partition(), v.Topic())
	}
	r := v.Record(0)
	if r.Offset() != 100 || r.Timestamp() != 1700000000000 || string(r.Key()) != "k1" || string(r.Value()) != "v1" || r.HeaderCount() != 2 {
		t.Errorf("record 0: %d %d %q %q %d", r.Offset(), r.Timestamp(), r.Key(), r.Value(), r.HeaderCount())
	}
	if k, val := r.Header(1); string(k) != "null" || val != nil {
		t.Errorf("null header: %q %v", k, val)
	}
	if val, ok := r.HeaderValue("checkpoint"); !ok || string(val) != "yes" {
		t.Errorf("HeaderValue: %q %v", val, ok)
	}
	if _, ok := r.HeaderValue("nope"); ok {
		t.Errorf("HeaderValue of a missing header")
	}
	r = v.Record(1)
	if r.Key() != nil || r.Value() == nil || len(r.Value()) != 0 || r.Timestamp() != -5 || r.HeaderCount() != 0 {
		t.Errorf("record 1: null key %v, empty value %v", r.Key(), r.Value())
	}
	r = v.Record(2)
	if r.Key() == nil || r.Value() != nil || r.HeaderCount() != 1 {
		t.Errorf("record 2: empty key %v, null value %v", r.Key(), r.Value())
	}
	if k, val := r.Header(0); string(k) != "h" || string(val) != "x" {
		t.Errorf("record 2 header: %q %q", k, val)
	}
	if a := v.Answer(); len(a) < ProposalSize || !bytes.Equal(a, make([]byte, len(a))) {
		t.Errorf("answer area %v", a)
	}
	// Values alias the region, capped: appending to one never overwrites
	// the next.
	if val := v.Record(0).Value(); cap(val) != len(val) {
		t.Errorf("value capacity %d, length %d", cap(val), len(val))
	}
}

func TestParseRejects(t *testing.T) {
	var e Encoder
	e.Reset(Meta{})
	e.Add(1, 1, nil, []byte("v"))
	good := e.AppendRegion(nil)
	for _, tc := range []struct {
		name string
		mut  func([]byte) []byte
	}{
		{"short", func(b []byte) []byte { return b[:10] }},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }},
		{"version", func(b []byte) []byte { b[4] = 9; return b }},
		{"size past the end", func(b []byte) []byte { le.PutUint32(b[8:], uint32(len(b)+1)); return b }},
		{"count too large", func(b []byte) []byte { le.PutUint32(b[12:], 1000); return b }},
		{"answer area", func(b []byte) []byte { le.PutUint32(b[60:], 1); return b }},
	} {
		b := tc.mut(append([]byte(nil), good...))
		if _, err := Parse(b); !errors.Is(err, ErrBadRegion) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestParams(t *testing.T) {
	ps := []Param{{"a", "1"}, {"b", ""}, {"long", strings.Repeat("x", 300)}}
	got, err := DecodeParams(AppendParams(nil, ps))
	if err != nil || !slices.Equal(got, ps) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if got, err := DecodeParams(AppendParams(nil, nil)); err != nil || len(got) != 0 {
		t.Errorf("empty: %v %v", got, err)
	}
	enc := AppendParams(nil, ps)
	for i := 0; i < len(enc); i++ {
		if _, err := DecodeParams(enc[:i]); !errors.Is(err, ErrBadParams) {
			t.Fatalf("truncated at %d: %v", i, err)
		}
	}
	if _, err := DecodeParams(append(enc, 0)); !errors.Is(err, ErrBadParams) {
		t.Errorf("trailing byte: %v", err)
	}
}

func TestBitmap(t *testing.T) {
	m := NewBitmap(11)
	m.Keep(0)
	m.Keep(10)
	m.Set(3, true)
	m.Set(3, false)
	if !m.Kept(0) || !m.Kept(10) || m.Kept(3) || m.Count() != 2 || len(m.Bytes()) != 2 {
		t.Errorf("bitmap %08b", m.Bytes())
	}
	m.KeepAll()
	if m.Count() != 11 {
		t.Errorf("KeepAll: %d", m.Count())
	}
	if _, err := ParseBitmap(m.Bytes(), 11); err != nil {
		t.Errorf("parse KeepAll: %v", err)
	}
	if _, err := ParseBitmap([]byte{0xFF, 0xFF}, 11); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("stray bits: %v", err)
	}
	if _, err := ParseBitmap([]byte{1}, 11); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("short: %v", err)
	}
	c := m.Clone()
	c.Drop(0)
	if !m.Kept(0) {
		t.Errorf("Clone aliases")
	}
}

func TestProposal(t *testing.T) {
	for _, p := range []Proposal{{}, {Commit: true, Through: 0}, {Commit: true, Through: 1 << 60}} {
		b := make([]byte, ProposalSize)
		p.Put(b)
		got, err := ParseProposal(b)
		if err != nil || got != p {
			t.Errorf("%v: %v %v", p, got, err)
		}
	}
	bad := [][]byte{
		make([]byte, 8),
		{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0},
	}
	for _, b := range bad {
		if _, err := ParseProposal(b); !errors.Is(err, ErrBadAnswer) {
			t.Errorf("%v: %v", b, err)
		}
	}
}

func TestJSONField(t *testing.T) {
	doc := []byte(` { "a" : "x" , "b":{"c":[1,{"d":"}"}],"e":{"f":true}}, "g\u0068":"esc", "n": -1.5e3, "s":"q\"uo\\",
		"z":null, "a":"dup"}`)
	for _, tc := range []struct {
		path, raw string
		ok        bool
	}{
		{"a", `"x"`, true},
		{"b.e.f", "true", true},
		{"b.c", `[1,{"d":"}"}]`, true},
		{"gh", `"esc"`, true},
		{"n", "-1.5e3", true},
		{"s", `"q\"uo\\"`, true},
		{"z", "null", true},
		{"b.e.g", "", false},
		{"a.b", "", false},
		{"missing", "", false},
		{"", "", false},
	} {
		raw, ok := JSONField(doc, tc.path)
		if ok != tc.ok || string(raw) != tc.raw {
			t.Errorf("%q: %q %v, want %q %v", tc.path, raw, ok, tc.raw, tc.ok)
		}
	}
	for _, bad := range []string{``, `[]`, `{`, `{"a"`, `{"a":`, `{"a":"x`, `{"b":1 "a":2}`, `"a"`} {
		if raw, ok := JSONField([]byte(bad), "a"); ok {
			t.Errorf("%q: found %q", bad, raw)
		}
	}
	for _, tc := range []struct {
		raw, want string
		eq        bool
	}{
		{`"lyon"`, "lyon", true},
		{`"ly\u006fn"`, "lyon", true},
		{`"\ud83d\ude00"`, "😀", true},
		{`"a\"b"`, `a"b`, true},
		{`"lyon"`, `"lyon"`, false},
		{`42`, "42", true},
		{`true`, "true", true},
		{`"x\q"`, "xq", false},
	} {
		if got := JSONValueEquals([]byte(tc.raw), []byte(tc.want)); got != tc.eq {
			t.Errorf("JSONValueEquals(%s, %s) = %v", tc.raw, tc.want, got)
		}
	}
}

func TestMatchHelpers(t *testing.T) {
	var e Encoder
	e.Reset(Meta{})
	for i, v := range []string{`{"s":"a"}`, `{"s":"b"}`, `nope`, `{"s":"a","t":1}`} {
		e.Add(uint64(i), 0, nil, []byte(v))
	}
	e.Add(4, 0, nil, nil)
	v, err := Parse(e.AppendRegion(nil))
	if err != nil {
		t.Fatal(err)
	}
	keep := NewBitmap(v.Len())
	keep.KeepAll() // the helpers overwrite
	if n := MatchJSON(&v, "s", []byte("a"), keep); n != 2 || !keep.Kept(0) || !keep.Kept(3) || keep.Count() != 2 {
		t.Errorf("MatchJSON: %d %08b", n, keep.Bytes())
	}
	if n := MatchContains(&v, []byte("o"), keep); n != 1 || !keep.Kept(2) {
		t.Errorf("MatchContains: %d %08b", n, keep.Bytes())
	}
}

// JSONField agrees with encoding/json on the top-level members of valid
// objects.
func FuzzJSONField(f *testing.F) {
	f.Add([]byte(`{"a":"x","b":[1,2,{"a":3}],"c":{"a":"y"}}`), "a")
	f.Add([]byte(`{"a\"":1,"a":2}`), "a")
	f.Add([]byte(`{"é":"\u00e9"}`), "é")
	f.Fuzz(func(t *testing.T, doc []byte, name string) {
		raw, ok := JSONField(doc, name)
		if strings.Contains(name, ".") {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(doc, &m) != nil || !json.Valid(doc) {
			return
		}
		if bytes.Count(doc, []byte(`"`+name+`"`)) > 1 {
			return // duplicate names: encoding/json keeps the last, JSONField the first
		}
		want, has := m[name]
		if has != ok {
			t.Fatalf("%s: member %q: found %v, encoding/json %v", doc, name, ok, has)
		}
		if ok && !bytes.Equal(bytes.TrimSpace(raw), bytes.TrimSpace(want)) {
			t.Fatalf("%s: member %q: %q, encoding/json %q", doc, name, raw, want)
		}
	})
}
