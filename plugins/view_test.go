package plugins

import (
	"errors"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

func TestNewView(t *testing.T) {
	var b wire.BatchBuilder
	for i := 0; i < 20; i++ {
		b.Append(wire.Record{Timestamp: int64(1000 + i), Key: []byte{byte('a' + i)},
			Value: []byte(strings.Repeat("v", 50)), Headers: []wire.Header{{Key: "i", Value: []byte{byte(i)}}}})
	}
	zstd, err := b.Build(wire.CompressionZstd)
	if err != nil {
		t.Fatal(err)
	}
	wire.StampBaseOffset(zstd, 500)

	// Compressed input, clipped to [505, 512).
	v, err := NewView(PollResult{Topic: "t", Partition: 2, From: 505, Next: 512, Batches: [][]byte{zstd}})
	if err != nil {
		t.Fatal(err)
	}
	if v.Len() != 7 || v.From() != 505 || v.Next() != 512 {
		t.Fatalf("view of %d records [%d, %d)", v.Len(), v.From(), v.Next())
	}
	r := v.Record(0)
	if r.Offset() != 505 || r.Timestamp() != 1005 || string(r.Key()) != "f" || len(r.Value()) != 50 {
		t.Errorf("first record: %d %d %q", r.Offset(), r.Timestamp(), r.Key())
	}
	if h, ok := r.HeaderValue("i"); !ok || h[0] != 5 {
		t.Errorf("header: %v %v", h, ok)
	}
	// Next 0: after the last record.
	v, err = NewView(PollResult{From: 518, Batches: [][]byte{zstd}})
	if err != nil || v.Len() != 2 || v.Next() != 520 {
		t.Fatalf("open end: %v records, next %d, %v", v.Len(), v.Next(), err)
	}
	// Nothing in range: an empty view at From.
	v, err = NewView(PollResult{From: 600, Batches: [][]byte{zstd}})
	if err != nil || v.Len() != 0 || v.Next() != 600 {
		t.Fatalf("empty: %v records, next %d, %v", v.Len(), v.Next(), err)
	}
	// Corrupt input is the batch codec's error.
	bad := append([]byte(nil), zstd...)
	bad[len(bad)-1] ^= 0xFF
	if _, err := NewView(PollResult{Batches: [][]byte{bad}}); !errors.Is(err, wire.ErrCorruptBatch) {
		t.Errorf("corrupt batch: %v", err)
	}
	if _, err := v.Filtered(newBitmapAll(3), wire.CompressionNone, 0); err == nil {
		t.Errorf("a bitmap of the wrong size was accepted")
	}
}
