package abi

import (
	"bytes"
	"errors"
	"testing"
)

// inputs returns a view of n records: record i has key "k<i>", value
// "v<i>" and one header "h"="<i>".
func inputs(n int) *View {
	var e Encoder
	e.Reset(Meta{Topic: "t", Next: uint64(n)})
	for i := 0; i < n; i++ {
		d := []byte{byte('0' + i)}
		e.Add(uint64(i), int64(100+i), append([]byte("k"), d...), append([]byte("v"), d...))
		e.AddHeader("h", d)
	}
	v, err := Parse(e.AppendRegion(nil))
	if err != nil {
		panic(err)
	}
	return &v
}

func TestTransformAnswerRoundTrip(t *testing.T) {
	in4 := inputs(4)
	var e OutputEncoder
	e.Reset()
	e.Add(0, 7, []byte("k"), nil)
	e.Add(0, -1, nil, []byte{}, OutHeader{Key: []byte("h"), Value: []byte("v")}, OutHeader{Key: []byte{}, Value: nil})
	e.Add(3, 9, []byte{}, []byte("value"))
	ans := append([]byte(nil), e.Finish([]byte("state"))...)
	a, err := ParseTransformAnswer(ans, in4, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Outputs) != 3 || string(a.State) != "state" {
		t.Fatalf("%+v", a)
	}
	o := a.Outputs
	if o[0].Input != 0 || o[0].Timestamp != 7 || string(o[0].Key) != "k" || o[0].Value != nil ||
		o[1].Key != nil || o[1].Value == nil || len(o[1].Value) != 0 || len(o[1].Headers) != 2 ||
		string(o[1].Headers[0].Value) != "v" || o[1].Headers[1].Key == nil || o[1].Headers[1].Value != nil ||
		o[2].Input != 3 || o[2].Key == nil || string(o[2].Value) != "value" || o[2].Headers != nil {
		t.Errorf("outputs %+v", o)
	}
	// Every truncation and every flipped byte is refused or parsed; none
	// panics, and a truncation is always refused.
	for n := 0; n < len(ans); n++ {
		if _, err := ParseTransformAnswer(ans[:n], in4, 5); !errors.Is(err, ErrBadAnswer) {
			t.Fatalf("answer cut to %d bytes: %v", n, err)
		}
	}
	for i := range ans {
		for _, b := range []byte{0, 0xFF, 0x7F, 0x80} {
			bad := bytes.Clone(ans)
			bad[i] = b
			_, _ = ParseTransformAnswer(bad, in4, 5)
		}
	}
	// The state limit and the input count are the caller's.
	if _, err := ParseTransformAnswer(ans, in4, 4); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("state over the limit: %v", err)
	}
	if _, err := ParseTransformAnswer(ans, inputs(3), 5); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("an output from input 3 of 3: %v", err)
	}
	// An empty answer: nothing out, no state.
	e.Reset()
	if a, err := ParseTransformAnswer(e.Finish(nil), inputs(1), 0); err != nil || len(a.Outputs) != 0 || a.State != nil {
		t.Errorf("empty answer: %+v %v", a, err)
	}
	// Parts taken from the input are the input's, and cost the answer
	// nothing but the entry.
	e.Reset()
	e.AddInput(1, 5, TakeKey|TakeValue|TakeHeaders, []byte("ignored"), nil)
	e.AddInput(2, 6, TakeValue, []byte("own"), nil, OutHeader{Key: []byte("x")})
	ans = e.Finish(nil)
	if len(ans) != TransformAnswerSize+2*OutputEntrySize+len("own")+outputHeaderSize+1 {
		t.Errorf("answer of %d bytes", len(ans))
	}
	a, err = ParseTransformAnswer(ans, in4, 0)
	if err != nil {
		t.Fatal(err)
	}
	o = a.Outputs
	if string(o[0].Key) != "k1" || string(o[0].Value) != "v1" || !o[0].InputHeaders || o[0].Headers != nil || o[0].Timestamp != 5 ||
		string(o[1].Key) != "own" || string(o[1].Value) != "v2" || o[1].InputHeaders || len(o[1].Headers) != 1 {
		t.Errorf("outputs taking from the input: %+v", o)
	}
	if p, n, ok := UnpackAnswer(PackAnswer(0x7FFF0000, 12)); !ok || p != 0x7FFF0000 || n != 12 {
		t.Errorf("pack/unpack: %#x %d %v", p, n, ok)
	}
	if _, _, ok := UnpackAnswer(-1); ok {
		t.Error("an error result unpacked as an answer")
	}
}

// A value in spans is read from the guest's memory, each span checked
// against it and the whole answer against the limit; a reader without
// the memory refuses it.
func TestTransformAnswerSpans(t *testing.T) {
	in4 := inputs(4)
	mem := []byte("0123456789abcdef")
	var e OutputEncoder
	e.Reset()
	e.AddSpans(1, 5, TakeKey|TakeHeaders, nil, []Span{{Ptr: 10, Len: 3}, {Ptr: 0, Len: 2}})
	e.AddSpans(2, 6, 0, []byte("own"), nil)
	e.Add(3, 7, nil, []byte("plain"))
	ans := append([]byte(nil), e.Finish([]byte("s"))...)
	var a TransformAnswer
	if err := ParseTransformAnswerInto(&a, ans, in4, mem, 1, 1<<10); err != nil {
		t.Fatal(err)
	}
	o := a.Outputs
	if len(o) != 3 || o[0].Value != nil || len(o[0].ValueParts) != 2 || string(o[0].ValueParts[0])+string(o[0].ValueParts[1]) != "abc01" ||
		o[0].ValueLen() != 5 || string(o[0].Key) != "k1" || !o[0].InputHeaders ||
		o[1].ValueParts != nil || o[1].Value == nil || len(o[1].Value) != 0 || string(o[1].Key) != "own" ||
		string(o[2].Value) != "plain" || o[2].ValueLen() != 5 || string(a.State) != "s" {
		t.Fatalf("outputs %+v", o)
	}
	// The room is reused: a second parse of the same answer allocates
	// nothing.
	if n := testing.AllocsPerRun(10, func() { _ = ParseTransformAnswerInto(&a, ans, in4, mem, 1, 1<<10) }); n != 0 {
		t.Errorf("%v allocations parsing into a used answer", n)
	}
	for n := 0; n < len(ans); n++ {
		if err := ParseTransformAnswerInto(&a, ans[:n], in4, mem, 1, 1<<10); !errors.Is(err, ErrBadAnswer) || len(a.Outputs) != 0 {
			t.Fatalf("answer cut to %d bytes: %v", n, err)
		}
	}
	for i := range ans {
		for _, b := range []byte{0, 0xFF, 0x7F, 0x80} {
			bad := bytes.Clone(ans)
			bad[i] = b
			_ = ParseTransformAnswerInto(&a, bad, in4, mem, 1, 1<<10)
		}
	}
	if err := ParseTransformAnswerInto(&a, ans, in4, mem[:12], 1, 1<<10); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("a span past the memory: %v", err)
	}
	if err := ParseTransformAnswerInto(&a, ans, in4, mem, 1, len(ans)+4); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("spans past the limit: %v", err)
	}
	if _, err := ParseTransformAnswer(ans, in4, 1); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("spans without the memory: %v", err)
	}
}
