package plugins_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/record"
)

// A filter over one poll result, and the reply the node builds from it.
// testdata/prefix.wasm is sdk/plugin/examples/watfilter/prefix.wat,
// assembled.
func Example() {
	ctx := context.Background()
	h, err := plugins.NewHost(ctx, plugins.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	defer h.Close(ctx)
	wasm, err := os.ReadFile("testdata/prefix.wasm")
	if err != nil {
		panic(err)
	}
	if _, err := h.Add(ctx, "prefix", plugins.KindFilter, wasm); err != nil {
		panic(err)
	}

	// A stored batch at offsets 100-103, as the engine returns it.
	var b record.BatchBuilder
	for _, v := range []string{"temp=21", "hum=40", "temp=22", "hum=41"} {
		b.Append(record.Record{Value: []byte(v)})
	}
	batch, _ := b.Build(record.CompressionNone)
	record.StampBaseOffset(batch, 100)

	// The poll read from 101.
	v, err := plugins.NewView(plugins.PollResult{Topic: "sensors", From: 101, Batches: [][]byte{batch}})
	if err != nil {
		panic(err)
	}
	keep, err := h.Filter(ctx, "prefix", plugins.Params{"prefix": "temp"}, v)
	if err != nil {
		panic(err)
	}
	reply, err := v.Filtered(keep, record.CompressionNone, 0)
	if err != nil {
		panic(err)
	}
	it, _ := record.NewRecordIterator(reply[0], 0)
	for r, ok := it.Next(); ok; r, ok = it.Next() {
		fmt.Println(r.Offset, string(r.Value))
	}
	fmt.Println("next position", v.Next())
	// Output:
	// 102 temp=22
	// next position 104
}
