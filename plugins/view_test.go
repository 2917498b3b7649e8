package plugins

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/plugins/abi"
	"github.com/ledgemq/ledge/record"
)

func TestNewView(t *testing.T) {
	var b record.BatchBuilder
	for i := 0; i < 20; i++ {
		b.Append(record.Record{Timestamp: int64(1000 + i), Key: []byte{byte('a' + i)},
			Value: []byte(strings.Repeat("v", 50)), Headers: []record.Header{{Key: "i", Value: []byte{byte(i)}}}})
	}
	zstd, err := b.Build(record.CompressionZstd)
	if err != nil {
		t.Fatal(err)
	}
	record.StampBaseOffset(zstd, 500)

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
	if _, err := NewView(PollResult{Batches: [][]byte{bad}}); !errors.Is(err, record.ErrCorruptBatch) {
		t.Errorf("corrupt batch: %v", err)
	}
	if _, err := v.Filtered(newBitmapAll(3), record.CompressionNone, 0); err == nil {
		t.Errorf("a bitmap of the wrong size was accepted")
	}
}

// TestReleasedViewsLeaveNothingBehind: a view built in the memory a larger
// view released reads exactly as one built fresh, answer area zeroed, and
// the batches Filtered built from the released view are untouched by the
// next view.
func TestReleasedViewsLeaveNothingBehind(t *testing.T) {
	batch := func(n, size int, c record.Compression) []byte {
		var b record.BatchBuilder
		for i := 0; i < n; i++ {
			b.Append(record.Record{Timestamp: int64(i), Key: []byte{byte('k' + i%3)},
				Value:   []byte(strings.Repeat(string(rune('a'+i%26)), size)),
				Headers: []record.Header{{Key: "h", Value: []byte{byte(i)}}}})
		}
		out, err := b.Build(c)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	big := PollResult{Topic: "big-topic", From: 0, Batches: [][]byte{batch(300, 900, record.CompressionNone), batch(300, 900, record.CompressionZstd)}}
	record.StampBaseOffset(big.Batches[1], 300)
	small := PollResult{Topic: "s", Partition: 3, From: 2, Next: 9, Batches: [][]byte{batch(10, 20, record.CompressionS2)}}

	fresh, err := (&viewBufs{}).build(small)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), fresh.region...)

	for round := 0; round < 3; round++ {
		v, err := NewView(big)
		if err != nil {
			t.Fatal(err)
		}
		keep := abi.NewBitmap(v.Len())
		for i := 0; i < v.Len(); i += 7 {
			keep.Set(i, true)
		}
		// Answers are written into the region's answer area by calls:
		// scribble over it, as a plugin's answer would.
		for i := len(v.region) - 16; i < len(v.region); i++ {
			v.region[i] = 0xAB
		}
		filtered, err := v.Filtered(keep, record.CompressionNone, 4096)
		if err != nil {
			t.Fatal(err)
		}
		kept := append([][]byte(nil), filtered...)
		copies := make([][]byte, len(filtered))
		for i, b := range filtered {
			copies[i] = append([]byte(nil), b...)
		}
		v.Release()

		s, err := NewView(small)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(s.region, want) {
			t.Fatalf("round %d: the view built in released memory differs from a fresh one", round)
		}
		if s.Len() != 7 || string(s.Record(0).Value()) != strings.Repeat("c", 20) {
			t.Fatalf("round %d: view of %d records, first value %q", round, s.Len(), s.Record(0).Value())
		}
		for i := range kept {
			if !bytes.Equal(kept[i], copies[i]) {
				t.Fatalf("round %d: filtered batch %d changed after its view was released", round, i)
			}
		}
		s.Release()
		s.Release() // twice is harmless
	}
}

// TestViewOfCompressedBatchesKeepsEachBatchsRecords: the view refers to
// records until its region is written, and an iterator decompresses each
// batch into the buffer of the one before: the first batch's records must
// still read as themselves in a view of two.
func TestViewOfCompressedBatchesKeepsEachBatchsRecords(t *testing.T) {
	build := func(letter string, base uint64, c record.Compression) []byte {
		var b record.BatchBuilder
		for i := 0; i < 50; i++ {
			b.Append(record.Record{Timestamp: 1, Key: []byte(letter), Value: []byte(strings.Repeat(letter, 100+i)),
				Headers: []record.Header{{Key: "from", Value: []byte(letter + letter)}}})
		}
		out, err := b.Build(c)
		if err != nil {
			t.Fatal(err)
		}
		record.StampBaseOffset(out, base)
		return out
	}
	for _, c := range []record.Compression{record.CompressionZstd, record.CompressionS2} {
		v, err := NewView(PollResult{Topic: "t", Batches: [][]byte{build("a", 0, c), build("b", 50, c), build("c", 100, record.CompressionNone)}})
		if err != nil {
			t.Fatal(err)
		}
		if v.Len() != 150 {
			t.Fatalf("%v: %d records", c, v.Len())
		}
		for i := 0; i < v.Len(); i++ {
			letter := string(rune('a' + i/50))
			r := v.Record(i)
			h, _ := r.HeaderValue("from")
			if string(r.Key()) != letter || string(r.Value()) != strings.Repeat(letter, 100+i%50) || string(h) != letter+letter {
				t.Fatalf("%v: record %d reads key %q, value %.10q…, header %q", c, i, r.Key(), r.Value(), h)
			}
		}
		v.Release()
	}
}
