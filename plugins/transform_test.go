package plugins

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/plugins/abi"
)

const perMinutePkg = "../sdk/plugin/examples/perminute"

// i64 instructions for the hand-built guests.
const (
	opI64Const      = 0x42
	opI64Or         = 0x84
	opI64Shl        = 0x86
	opI64ExtendI32U = 0xAD
)

func i64c(v int64) []byte { return appendS64([]byte{opI64Const}, v) }

// transformModule returns a module implementing the ABI skeleton (see
// abiModule) with a ledge_transform of the given body: locals 0-3 are
// (ptr, len, state, stateLen), the result an i64.
func transformModule(body []byte) *tModule {
	m := abiModule(nil, nil)
	m.funcs = append(m.funcs,
		tFunc{typ: sig()(tI32), body: i32c(abi.KindTransform), export: "ledge_kinds"},
		tFunc{typ: sig(tI32, tI32, tI32, tI32)(byte(valI64)), body: body, export: "ledge_transform"})
	return m
}

// echoState answers with the bytes it was handed as its state: the test
// writes the answer, byte for byte, as the "previous state".
var echoState = cat(localGet(2), []byte{opI64ExtendI32U}, i64c(32), []byte{opI64Shl},
	localGet(3), []byte{opI64ExtendI32U}, []byte{opI64Or})

// answer encodes a transform answer the way a guest would.
func answer(state []byte, outs ...abi.Output) []byte {
	var e abi.OutputEncoder
	e.Reset()
	for _, o := range outs {
		e.Add(o.Input, o.Timestamp, o.Key, o.Value, o.Headers...)
	}
	return append([]byte(nil), e.Finish(state)...)
}

func showOutputs(outs []Output) string {
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

// The aggregating example through the host: its counts travel between
// batches in the state alone, whichever instance serves the next batch.
func TestTransformStateRoundTrip(t *testing.T) {
	h := newTestHost(t, Config{})
	ctx := context.Background()
	mustAdd(t, h, "perminute", KindTransform, goModule(t, perMinutePkg))
	// batchOf stamps records 1700000000000+i: one minute for them all.
	batch := func(base uint64, keys ...string) *View {
		recs := make([]testRecord, len(keys))
		for i, k := range keys {
			recs[i] = testRecord{key: k, value: "x"}
		}
		return testView(t, base, batchOf(t, base, recs...))
	}
	v1 := batch(0, "a", "b", "a")
	res, err := h.Transform(ctx, "perminute", nil, v1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Outputs) != 0 || len(res.State) == 0 {
		t.Fatalf("first batch: %s state %d bytes", showOutputs(res.Outputs), len(res.State))
	}
	st := res.State
	res, err = h.Transform(ctx, "perminute", nil, batch(3, "c"), st)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Outputs) != 0 {
		t.Fatalf("same minute: %s", showOutputs(res.Outputs))
	}
	// Another instance (the parameters differ) gets the state and carries
	// on; with a window of 1 ms, the next record closes the open window.
	res, err = h.Transform(ctx, "perminute", Params{"window": "1"}, batch(4, "d"), res.State)
	if err != nil {
		t.Fatal(err)
	}
	// The window opened under the default minute: it started at
	// 1699999980000, and ends 1 ms later under the new parameters.
	want := `0@1699999980000 "a"="{\"minute\":1699999980000,\"key\":\"a\",\"count\":2}"; ` +
		`0@1699999980000 "b"="{\"minute\":1699999980000,\"key\":\"b\",\"count\":1}"; ` +
		`0@1699999980000 "c"="{\"minute\":1699999980000,\"key\":\"c\",\"count\":1}"; `
	if got := showOutputs(res.Outputs); got != want {
		t.Fatalf("outputs\n got %s\nwant %s", got, want)
	}
	// The same inputs give the same answer (a retry after a crash).
	st3, err := h.Transform(ctx, "perminute", nil, batch(3, "c"), st)
	if err != nil {
		t.Fatal(err)
	}
	again, err := h.Transform(ctx, "perminute", Params{"window": "1"}, batch(4, "d"), st3.State)
	if err != nil {
		t.Fatal(err)
	}
	if showOutputs(again.Outputs) != want || string(again.State) != string(res.State) {
		t.Errorf("a replay answered differently: %s", showOutputs(again.Outputs))
	}
	// An empty batch calls nothing and keeps the state.
	empty := testView(t, 9)
	if r, err := h.Transform(ctx, "perminute", nil, empty, st); err != nil || len(r.Outputs) != 0 || string(r.State) != string(st) {
		t.Errorf("empty batch: %v %v", r, err)
	}
	s, _ := h.Stat("perminute")
	if s.Stats.Calls != 5 || s.Stats.RecordsIn != 7 || s.Stats.RecordsOut != 6 {
		t.Errorf("stats: %+v", s.Stats)
	}
	if _, err := h.Filter(ctx, "perminute", nil, v1); !errors.Is(err, ErrWrongKind) {
		t.Errorf("a transform used as a filter: %v", err)
	}
	if _, err := h.Add(ctx, "pm-filter", KindFilter, goModule(t, perMinutePkg)); !errors.Is(err, ErrWrongKind) {
		t.Errorf("a transform added as a filter: %v", err)
	}
	if _, err := h.Add(ctx, "json-transform", KindTransform, goModule(t, jsonFilterPkg)); !errors.Is(err, ErrWrongKind) {
		t.Errorf("a filter added as a transform: %v", err)
	}
	if _, err := h.Transform(ctx, "perminute", Params{"window": "0"}, v1, nil); !errors.Is(err, ErrPluginFailed) {
		t.Errorf("window=0: %v", err)
	}
}

// A guest's answer is taken as it is written: outputs, headers, null and
// empty keys and values, the state.
func TestTransformAnswer(t *testing.T) {
	h := newTestHost(t, Config{})
	ctx := context.Background()
	mustAdd(t, h, "echo", KindTransform, transformModule(echoState).encode())
	v := hostileView3(t)
	ans := answer([]byte("next"),
		abi.Output{Input: 0, Timestamp: 5, Key: []byte("k"), Value: []byte("v")},
		abi.Output{Input: 0, Timestamp: 6, Key: nil, Value: []byte{}, Headers: []abi.OutHeader{{Key: []byte("h"), Value: nil}, {Key: []byte("i"), Value: []byte("2")}}},
		abi.Output{Input: 2, Timestamp: -1})
	res, err := h.Transform(ctx, "echo", nil, v, ans)
	if err != nil {
		t.Fatal(err)
	}
	want := `0@5 "k"="v"; 0@6 ""="" [h:""] [i:"2"]; 2@-1 ""=""; `
	if got := showOutputs(res.Outputs); got != want || string(res.State) != "next" {
		t.Fatalf("outputs %s state %q", got, res.State)
	}
	if res.Outputs[1].Key != nil || res.Outputs[1].Value == nil || res.Outputs[1].Headers[0].Value != nil || res.Outputs[2].Value != nil {
		t.Errorf("null and empty are not told apart: %+v", res.Outputs)
	}
	// Nothing out, no state: the answer is just its header.
	res, err = h.Transform(ctx, "echo", nil, v, answer(nil))
	if err != nil || len(res.Outputs) != 0 || res.State != nil {
		t.Errorf("empty answer: %+v %v", res, err)
	}
}

// Answers outside the ABI fail the call as invalid answers, with a strike,
// and allocate nothing from the counts they claim.
func TestTransformHostileAnswers(t *testing.T) {
	h := newTestHost(t, Config{MaxStrikes: 1 << 20, MaxOutputBytes: 1 << 20, MaxStateBytes: 64 << 10})
	ctx := context.Background()
	mustAdd(t, h, "echo", KindTransform, transformModule(echoState).encode())
	v := hostileView3(t)
	le := func(b []byte, at int, v uint32) []byte {
		b = append([]byte(nil), b...)
		b[at], b[at+1], b[at+2], b[at+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		return b
	}
	one := answer(nil, abi.Output{Input: 1, Key: []byte("k"), Value: []byte("v")})
	spans := func(sp ...abi.Span) []byte {
		var e abi.OutputEncoder
		e.Reset()
		e.AddSpans(0, 0, 0, nil, sp)
		return append([]byte(nil), e.Finish(nil)...)
	}
	page := abi.Span{Ptr: 0, Len: 64 << 10}
	for _, tc := range []struct {
		name, substr string
		ans          []byte
	}{
		{"short", "the header alone", []byte("LTA1")},
		{"bad magic", "magic", le(one, 0, 0x12345678)},
		{"reserved", "reserved", le(one, 12, 1)},
		{"huge count", "outputs cannot fit", le(one, 4, math.MaxUint32)},
		{"count past the outputs", "cannot fit", le(one, 4, 2)},
		{"count short of the outputs", "between the last output and the state", le(one, 4, 0)},
		{"input out of range", "comes from input 3 of 3", le(one, 16, 3)},
		{"state past the answer", "state of", le(one, 8, 1000)},
		{"key past the answer", "key of", le(one, 16+16, 1<<30)},
		{"value past the answer", "value of", le(one, 16+20, 1<<20)},
		{"huge header count", "headers cannot fit", le(one, 16+4, math.MaxUint32-1)},
		{"key from the input, and its bytes too", "between the last output and the state", le(one, 16+16, math.MaxUint32-1)},
		{"null header name", "cannot be null", le(answer(nil, abi.Output{Input: 0, Headers: []abi.OutHeader{{Key: []byte("h")}}}), 16+24, math.MaxUint32)},
		{"value span outside memory", "outside the guest's memory", spans(page, abi.Span{Ptr: 0x7FFF0000, Len: 8})},
		{"huge span count", "value spans cannot fit", le(spans(page), 16+24, math.MaxUint32)},
		{"spans past the output limit", "passes 1048576 bytes", spans(page, page, page, page, page, page, page, page,
			page, page, page, page, page, page, page, page, page)},
		{"inputs out of order", "after an output from input 2",
			append(answer(nil, abi.Output{Input: 2})[:16+24], answer(nil, abi.Output{Input: 1})[16:]...)},
	} {
		ans := tc.ans
		if tc.name == "inputs out of order" {
			ans = le(ans, 4, 2)
		}
		_, err := h.Transform(ctx, "echo", nil, v, ans)
		if !errors.Is(err, ErrInvalidAnswer) || !strings.Contains(err.Error(), tc.substr) {
			t.Errorf("%s: %v, want an invalid answer saying %q", tc.name, err, tc.substr)
		}
	}
	// The echo cannot answer a state over the limit (the host refuses to
	// hand one in): the parser's own check.
	if _, err := abi.ParseTransformAnswer(answer(make([]byte, 64<<10+1)), &v.abi, 64<<10); !errors.Is(err, abi.ErrBadAnswer) {
		t.Errorf("a state over the limit: %v", err)
	}
	// A hostile count costs no more than the answer's own size: the
	// refusal allocates its error message and nothing for the outputs.
	huge := le(one, 4, math.MaxUint32)
	if n := testing.AllocsPerRun(10, func() { _, _ = abi.ParseTransformAnswer(huge, &v.abi, 1<<20) }); n > 8 {
		t.Errorf("%v allocations refusing a claimed count", n)
	}
	for _, tc := range []struct {
		name, substr string
		body         []byte
		err          error
	}{
		{"outside memory", "outside the plugin's memory", i64c(int64(abi.PackAnswer(0x7FFF0000, 64))), ErrInvalidAnswer},
		{"over the output limit", "the limit is 1048576", i64c(int64(abi.PackAnswer(0, 2<<20))), ErrInvalidAnswer},
		{"not an error code", "not an error code", i64c(-1 << 40), ErrInvalidAnswer},
		{"error code", "error code -7", i64c(-7), ErrPluginFailed},
		{"trap", "unreachable", []byte{opUnreachable}, ErrTrap},
	} {
		mustAdd(t, h, "bad", KindTransform, transformModule(tc.body).encode())
		_, err := h.Transform(ctx, "bad", nil, v, nil)
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.substr) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.err, tc.substr)
		}
	}
	if _, err := h.Transform(ctx, "echo", nil, v, make([]byte, 64<<10+1)); !errors.Is(err, ErrInputTooLarge) {
		t.Errorf("a state over the limit handed in: %v", err)
	}
	st, _ := h.Stat("echo")
	if st.Stats.InvalidAnswers != 17 || st.Stats.Strikes != 17 {
		t.Errorf("echo stats: %+v", st.Stats)
	}
}

// A transform runs under the filters' limits: its deadline, the memory
// cap, and quarantine after MaxStrikes failures.
func TestTransformLimits(t *testing.T) {
	e := newHostileEnv(t)
	ctx := context.Background()
	v := hostileView3(t)
	spin := transformModule(cat(i32c(1), i32c(0), i32c(8), []byte{opCall, 0}, loopForever, i64c(0)))
	spin.imports = []tImport{{"ledge", "log", sig(tI32, tI32, tI32)()}}
	spin.data = []tData{{0, []byte("spinning")}}
	mustAdd(t, e.h, "spin", KindTransform, spin.encode())
	err := e.runaway("spinning", func() error { _, err := e.h.Transform(ctx, "spin", nil, v, nil); return err })
	expectErr(t, err, ErrTimeout, "ledge_transform ran past its deadline")

	growBomb := transformModule(cat([]byte{opLoop, blockEmpty}, i32c(1), []byte{opMemoryGrow, 0}, i32c(-1),
		[]byte{opI32Ne, opBrIf, 0, opEnd, opUnreachable}))
	mustAdd(t, e.h, "grow", KindTransform, growBomb.encode())
	_, err = e.h.Transform(ctx, "grow", nil, v, nil)
	expectErr(t, err, ErrMemoryLimit, "ledge_transform")

	q := newTestHost(t, Config{MaxStrikes: 2})
	mustAdd(t, q, "trap", KindTransform, transformModule([]byte{opUnreachable}).encode())
	for i := 0; i < 2; i++ {
		if _, err := q.Transform(ctx, "trap", nil, v, nil); !errors.Is(err, ErrTrap) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if _, err := q.Transform(ctx, "trap", nil, v, nil); !errors.Is(err, ErrQuarantined) {
		t.Fatalf("after two traps: %v", err)
	}
}

// A Go guest passing large batches through, call after call, with no
// state: its garbage collector runs during the calls and finds nothing
// amiss (an empty state once made it crash the guest).
func TestTransformGoGuestManyCalls(t *testing.T) {
	h := newTestHost(t, Config{})
	mustAdd(t, h, "map", KindTransform, goModule(t, mapTransformPkg))
	recs := make([]testRecord, 1000)
	for i := range recs {
		recs[i] = testRecord{key: "sensor", value: strings.Repeat("v", 1024)}
	}
	recs[0].headers = map[string]string{"h": "x"}
	batch := batchOf(t, 0, recs...)
	for i := 0; i < 40; i++ {
		v := testView(t, 0, batch)
		res, err := h.Transform(context.Background(), "map", Params{"mode": "pass"}, v, nil)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if len(res.Outputs) != 1000 || string(res.Outputs[999].Value) != recs[999].value || string(v.OutputHeaders(res.Outputs[0])[0].Value) != "x" {
			t.Fatalf("call %d: %d outputs", i, len(res.Outputs))
		}
		v.Release()
	}
}

// A value in spans (the map mode's input, upper-cased in place) is read
// from the guest's memory: TransformFunc hands it over in parts, while
// the instance is held; Transform hands it over joined, copied out.
func TestTransformValueSpans(t *testing.T) {
	h := newTestHost(t, Config{})
	ctx := context.Background()
	mustAdd(t, h, "map", KindTransform, goModule(t, mapTransformPkg))
	recs := []testRecord{{key: "k", value: "hello, World \u00e9!"}, {key: "k2", value: strings.Repeat("abz{`", 99)}, {key: "k3", value: ""}}
	want := func(s string) string {
		b := []byte(s)
		for i, c := range b {
			if c >= 'a' && c <= 'z' {
				b[i] = c - 32
			}
		}
		return string(b)
	}
	v := testView(t, 0, batchOf(t, 0, recs...))
	defer v.Release()
	res, err := h.Transform(ctx, "map", Params{"mode": "map"}, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range res.Outputs {
		if string(o.Value) != want(recs[i].value) || o.Value == nil || o.ValueParts != nil || string(o.Key) != recs[i].key {
			t.Errorf("output %d: %q=%q (%d parts), want %q", i, o.Key, o.Value, len(o.ValueParts), want(recs[i].value))
		}
	}
	err = h.TransformFunc(ctx, "map", Params{"mode": "map"}, v, nil, func(r TransformResult) error {
		for i, o := range r.Outputs {
			var joined []byte
			for _, p := range o.ValueParts {
				joined = append(joined, p...)
			}
			if string(joined) != want(recs[i].value) || o.ValueLen() != len(recs[i].value) {
				t.Errorf("output %d in parts: %q", i, joined)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// An error of use is the caller's: returned as it is, no strike.
	errMine := errors.New("mine")
	if err := h.TransformFunc(ctx, "map", Params{"mode": "map"}, v, nil, func(TransformResult) error { return errMine }); err != errMine {
		t.Errorf("use's error came back as %v", err)
	}
	if st, _ := h.Stat("map"); st.Stats.Strikes != 0 {
		t.Errorf("use's error struck the plugin: %+v", st.Stats)
	}
}
