package plugins

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/record"
)

// The example plugins of sdk/plugin/examples, built for wasip1 and run
// through the host.

func TestJSONFilterExample(t *testing.T) {
	h := newTestHost(t, Config{})
	mustAdd(t, h, "json", KindFilter, goModule(t, jsonFilterPkg))
	v := testView(t, 100, batchOf(t, 100, values(
		`{"site":"lyon","temp":21}`,
		`{"site":"paris","temp":19}`,
		`not json at all`,
		`{"temp":22,"site":"lyon"}`,
		`{"site":{"name":"lyon"}}`,
	)...))
	for _, mode := range []string{"native", "record", "guest"} {
		keep, err := h.Filter(context.Background(), "json", Params{"field": "site", "equals": "lyon", "match": mode}, v)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if got, want := keptIndexes(keep), []int{0, 3}; !slices.Equal(got, want) {
			t.Errorf("%s: kept %v, want %v", mode, got, want)
		}
		keep, err = h.Filter(context.Background(), "json", Params{"field": "site.name", "equals": "lyon", "match": mode}, v)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if got, want := keptIndexes(keep), []int{4}; !slices.Equal(got, want) {
			t.Errorf("%s nested: kept %v, want %v", mode, got, want)
		}
	}
	_, err := h.Filter(context.Background(), "json", Params{"equals": "lyon"}, v)
	if !errors.Is(err, ErrPluginFailed) || !strings.Contains(err.Error(), `missing parameter "field"`) {
		t.Errorf("missing parameter: %v", err)
	}
	if st, _ := h.Stat("json"); st.Stats.Strikes != 0 {
		t.Errorf("a plugin's own error report counted a strike: %+v", st.Stats)
	}
}

// A filtered reply is a new batch of the kept records, with their offsets;
// the position still moves past what was dropped.
func TestFilteredReply(t *testing.T) {
	h := newTestHost(t, Config{})
	mustAdd(t, h, "json", KindFilter, goModule(t, jsonFilterPkg))
	b1 := batchOf(t, 10, []testRecord{
		{key: "k0", value: `{"on":true}`, headers: map[string]string{"h": "0"}},
		{value: `{"on":false}`},
		{key: "k2", value: `{"on":true}`},
	}...)
	b2 := batchOf(t, 13, values(`{"on":false}`, `{"on":true}`, `{"on":false}`)...)
	// The poll read from 11: record 10 of the first batch is not delivered.
	v, err := NewView(PollResult{Topic: "t", From: 11, Next: 16, Batches: [][]byte{b1, b2}})
	if err != nil {
		t.Fatal(err)
	}
	if v.Len() != 5 || v.From() != 11 || v.Next() != 16 {
		t.Fatalf("view: %d records [%d, %d)", v.Len(), v.From(), v.Next())
	}
	keep, err := h.Filter(context.Background(), "json", Params{"field": "on", "equals": "true"}, v)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []record.Compression{record.CompressionNone, record.CompressionZstd} {
		batches, err := v.Filtered(keep, c, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, b := range batches {
			it, err := record.NewRecordIterator(b, 0)
			if err != nil {
				t.Fatal(err)
			}
			for r, ok := it.Next(); ok; r, ok = it.Next() {
				got = append(got, string(r.Key)+"@"+string(rune('0'+r.Offset-10))+":"+string(r.Value))
			}
			if it.Err() != nil {
				t.Fatal(it.Err())
			}
		}
		if want := []string{`k2@2:{"on":true}`, `@4:{"on":true}`}; !slices.Equal(got, want) {
			t.Errorf("%v: filtered records %q, want %q", c, got, want)
		}
	}
	// Nothing kept: no batch, and the position is still Next.
	none, err := h.Filter(context.Background(), "json", Params{"field": "on", "equals": "maybe"}, v)
	if err != nil {
		t.Fatal(err)
	}
	if batches, err := v.Filtered(none, record.CompressionNone, 0); err != nil || len(batches) != 0 {
		t.Errorf("nothing kept: %d batches, %v", len(batches), err)
	}
}

func TestFilteredSplitsBatches(t *testing.T) {
	recs := make([]testRecord, 50)
	for i := range recs {
		recs[i] = testRecord{value: strings.Repeat("x", 100)}
	}
	v := testView(t, 0, batchOf(t, 0, recs...))
	keep := newBitmapAll(v.Len())
	batches, err := v.Filtered(keep, record.CompressionNone, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range batches {
		h, err := record.VerifyBatch(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		if h.UncompressedLen+record.BatchHeaderSize > 1000 {
			t.Errorf("batch of %d bytes, limit 1000", h.UncompressedLen+record.BatchHeaderSize)
		}
		n += int(h.RecordCount)
	}
	if n != 50 || len(batches) < 5 {
		t.Errorf("%d records in %d batches", n, len(batches))
	}
}

func TestSampleExample(t *testing.T) {
	h := newTestHost(t, Config{})
	mustAdd(t, h, "sample", KindFilter, goModule(t, samplePkg))
	recs := make([]testRecord, 1000)
	for i := range recs {
		recs[i] = testRecord{value: "reading"}
	}
	v := testView(t, 0, batchOf(t, 0, recs...))
	keep, err := h.Filter(context.Background(), "sample", Params{"every": "10"}, v)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < v.Len(); i++ {
		if keep.Kept(i) != (i%10 == 0) {
			t.Fatalf("every=10: record %d kept=%v", i, keep.Kept(i))
		}
	}
	keep, err = h.Filter(context.Background(), "sample", Params{"rate": "0.25"}, v)
	if err != nil {
		t.Fatal(err)
	}
	if n := keep.Count(); n < 150 || n > 350 {
		t.Errorf("rate=0.25 kept %d of 1000", n)
	}
}

func TestCheckpointExample(t *testing.T) {
	h := newTestHost(t, Config{})
	mustAdd(t, h, "checkpoint", KindCommitPolicy, goModule(t, checkpointPkg))
	mark := func(v string) testRecord {
		return testRecord{value: "x", headers: map[string]string{"checkpoint": v}}
	}
	plain := testRecord{value: "x"}
	v := testView(t, 50, batchOf(t, 50, plain, mark("a"), plain, mark("b"), plain))
	p, err := h.Propose(context.Background(), "checkpoint", nil, v)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Proposal{Commit: true, Through: 53}); p != want || p.Position() != 54 {
		t.Errorf("proposal %v, want %v", p, want)
	}
	p, err = h.Propose(context.Background(), "checkpoint", Params{"value": "a"}, v)
	if err != nil || p != (Proposal{Commit: true, Through: 51}) {
		t.Errorf("value=a: %v, %v", p, err)
	}
	p, err = h.Propose(context.Background(), "checkpoint", nil, testView(t, 0, batchOf(t, 0, plain, plain)))
	if err != nil || p.Commit {
		t.Errorf("no checkpoint: %v, %v", p, err)
	}
	// A commit policy is not a filter.
	if _, err := h.Filter(context.Background(), "checkpoint", nil, v); !errors.Is(err, ErrWrongKind) {
		t.Errorf("Filter on a commit policy: %v", err)
	}
}

// The WebAssembly text example is written from docs/PLUGINS.md alone.
func TestWATExample(t *testing.T) {
	wasm := watModule(t, prefixWAT)
	logs := &logSink{}
	h := newTestHost(t, Config{Logger: slogNew(logs)})
	mustAdd(t, h, "prefix", KindFilter, wasm)
	v := testView(t, 7, batchOf(t, 7, []testRecord{
		{value: "temp=21"}, {value: "hum=40"}, {value: "temp=22"}, {value: "te"}, {value: ""},
	}...))
	keep, err := h.Filter(context.Background(), "prefix", Params{"prefix": "temp"}, v)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := keptIndexes(keep), []int{0, 2}; !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	if !strings.Contains(logs.all(), "prefix filter ready") {
		t.Errorf("the plugin's log line is missing:\n%s", logs.all())
	}
	_, err = h.Filter(context.Background(), "prefix", Params{"other": "x"}, v)
	if !errors.Is(err, ErrPluginFailed) || !strings.Contains(err.Error(), `missing parameter "prefix"`) {
		t.Errorf("missing parameter: %v", err)
	}
	// It declares itself a filter only.
	if _, err := h.Add(context.Background(), "prefix-policy", KindCommitPolicy, wasm); !errors.Is(err, ErrWrongKind) {
		t.Errorf("adding a filter as a commit policy: %v", err)
	}
}

// testdata/prefix.wasm, used by Example, is the WAT example assembled.
func TestPrefixWasmIsCurrent(t *testing.T) {
	fresh := watModule(t, prefixWAT)
	stored, err := os.ReadFile("testdata/prefix.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, stored) {
		t.Errorf("testdata/prefix.wasm is stale: wat2wasm %s -o testdata/prefix.wasm", prefixWAT)
	}
}
