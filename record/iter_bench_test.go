package record

import "testing"

// BenchmarkRecordIterator walks a stored batch of 100 records of 1 KiB,
// verifying it first, as a consumer does with each batch of a poll.
func BenchmarkRecordIterator(b *testing.B) {
	v := make([]byte, 1024)
	var bb BatchBuilder
	for i := 0; i < 100; i++ {
		bb.Append(Record{Timestamp: int64(i), Value: v})
	}
	batch, err := bb.Build(CompressionNone)
	if err != nil {
		b.Fatal(err)
	}
	var it RecordIterator
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if err := it.Reset(batch, BatchMaxSize); err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			if _, ok := it.Next(); !ok {
				break
			}
			n++
		}
		if it.Err() != nil || n != 100 {
			b.Fatal(it.Err(), n)
		}
	}
}
