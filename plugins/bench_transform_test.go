package plugins

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/record"
)

const mapTransformPkg = "./testdata/maptransform"

// BenchmarkTransform compares, on polls of 1000 records of 1 KiB, a
// filter (the JSON example, host matcher: the filter path's fast case)
// with a transform passing every record through and one upper-casing
// every value, each call from a view of the stored batch to the validated
// answer. A transform copies every output back out of the guest, where a
// filter answers with one bit per record.
func BenchmarkTransform(b *testing.B) {
	var bb record.BatchBuilder
	pad := strings.Repeat("x", 1024)
	for i := 0; i < benchRecordsPerPoll; i++ {
		site := "lyon"
		if i%2 == 1 {
			site = "oslo"
		}
		v := `{"site":"` + site + `","pad":"` + pad[:1024-len(`{"site":"lyon","pad":""}`)] + `"}`
		bb.Append(record.Record{Timestamp: int64(i), Key: []byte("sensor"), Value: []byte(v)})
	}
	batch, err := bb.Build(record.CompressionNone)
	if err != nil {
		b.Fatal(err)
	}
	h := newTestHost(b, Config{Now: time.Now, CallTimeout: time.Second})
	mustAdd(b, h, "json", KindFilter, goModule(b, jsonFilterPkg))
	mustAdd(b, h, "map", KindTransform, goModule(b, mapTransformPkg))
	ctx := context.Background()
	run := func(b *testing.B, call func(v *View) error) {
		cpu0 := processCPU()
		for b.Loop() {
			v, err := NewView(PollResult{Batches: [][]byte{batch}})
			if err != nil {
				b.Fatal(err)
			}
			if err := call(v); err != nil {
				b.Fatal(err)
			}
			v.Release()
		}
		b.SetBytes(int64(len(batch)))
		reportRecords(b, benchRecordsPerPoll, cpu0)
	}
	b.Run("filter", func(b *testing.B) {
		p := Params{"field": "site", "equals": "lyon", "match": "native"}
		run(b, func(v *View) error { _, err := h.Filter(ctx, "json", p, v); return err })
	})
	for _, mode := range []string{"pass", "map"} {
		b.Run("transform-"+mode, func(b *testing.B) {
			p := Params{"mode": mode}
			run(b, func(v *View) error {
				res, err := h.Transform(ctx, "map", p, v, nil)
				if err == nil && len(res.Outputs) != v.Len() {
					b.Fatalf("%d outputs for %d records", len(res.Outputs), v.Len())
				}
				return err
			})
		})
	}
}
