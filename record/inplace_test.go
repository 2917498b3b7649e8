package record

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// A batch built in place behind a prefix is the very batch Build gives, and
// the prefix is left alone; the builder then goes on building ordinary
// batches in its own buffer.
func TestBatchBuiltInPlaceEqualsBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var inPlace BatchBuilder
	for _, c := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
		for _, n := range []int{1, 5, 300} {
			t.Run(fmt.Sprintf("%s/%d", c, n), func(t *testing.T) {
				recs := testRecords(rng, n)
				var plain BatchBuilder
				plain.SetProducer(9, 1, 100)
				for _, r := range recs {
					plain.Append(r)
				}
				want, err := plain.Build(c)
				if err != nil {
					t.Fatal(err)
				}

				prefix := []byte("frame-prefix")
				dst := append(make([]byte, 0, 64), prefix...) // too small: the records must grow it
				inPlace.ResetInPlace(dst)
				inPlace.SetProducer(9, 1, 100)
				for _, r := range recs {
					inPlace.Append(r)
				}
				if inPlace.Size() != plain.Size() {
					t.Fatalf("Size: in place %d, built %d", inPlace.Size(), plain.Size())
				}
				got, err := inPlace.FinishInPlace(c)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got[:len(prefix)], prefix) {
					t.Fatalf("prefix changed: %q", got[:len(prefix)])
				}
				if !bytes.Equal(got[len(prefix):], want) {
					t.Fatalf("in-place batch differs from Build's (%d vs %d bytes)", len(got)-len(prefix), len(want))
				}
				checkRecords(t, got[len(prefix):], recs, 0, false)

				// Back to ordinary batches: the caller's slice is not written again.
				snapshot := bytes.Clone(got)
				inPlace.Reset()
				inPlace.Append(Record{Value: []byte("after")})
				again, err := inPlace.Build(CompressionNone)
				if err != nil {
					t.Fatal(err)
				}
				checkRecords(t, again, []Record{{Value: []byte("after")}}, 0, false)
				if !bytes.Equal(got, snapshot) {
					t.Fatal("the finished in-place batch changed after the builder was reused")
				}
			})
		}
	}
}

func TestFinishInPlaceRefusesEmptyAndUnstarted(t *testing.T) {
	var b BatchBuilder
	if _, err := b.FinishInPlace(CompressionNone); err == nil {
		t.Fatal("FinishInPlace without ResetInPlace: no error")
	}
	b.ResetInPlace([]byte("p"))
	got, err := b.FinishInPlace(CompressionNone)
	if err == nil {
		t.Fatal("FinishInPlace of no records: no error")
	}
	if string(got) != "p" {
		t.Fatalf("a failed FinishInPlace returns %q, want the prefix alone", got)
	}
}

func BenchmarkBatchBuild100x1KiB(b *testing.B) {
	recs := make([]Record, 100)
	for i := range recs {
		recs[i] = Record{Timestamp: 1_700_000_000_000, Value: bytes.Repeat([]byte{byte(i)}, 1024)}
	}
	b.Run("Build", func(b *testing.B) {
		var bb BatchBuilder
		b.SetBytes(100 * 1024)
		for b.Loop() {
			bb.Reset()
			for _, r := range recs {
				bb.Append(r)
			}
			if _, err := bb.AppendBatch(make([]byte, 0, bb.Size()+64), CompressionNone); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("InPlace", func(b *testing.B) {
		var bb BatchBuilder
		buf := make([]byte, 0, 110*1024)
		b.SetBytes(100 * 1024)
		for b.Loop() {
			bb.ResetInPlace(buf[:0])
			for _, r := range recs {
				bb.Append(r)
			}
			var err error
			if buf, err = bb.FinishInPlace(CompressionNone); err != nil {
				b.Fatal(err)
			}
		}
	})
}
