package sdk

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ledgemq/ledge/transport/quic"
)

// Recycle hands what consumed records are made of back to the client, for
// later polls: the buffer their keys, values and headers are slices of,
// the records themselves, and the slice Poll returned them in. Call it
// with what a Poll returned once the application holds none of it any
// more (commit through the records first): a later poll overwrites it all.
// Records of one poll share their memory, so recycling any of them
// recycles it for all of them.
//
// Recycling is optional. Without it every poll reads into a fresh buffer
// and decodes into fresh records (zeroed, and garbage once the
// application drops them): a consumer replaying at hundreds of MB/s spends
// several percent of its processor on that. Records a producer sent, or
// that no poll returned, are ignored.
func Recycle(records []*Record) {
	// Every record is read before anything is handed back: the records,
	// and the slice holding them, go back too, and another consumer may
	// decode into them at once.
	var few [4]*pollFrame // usually one poll's records
	frames := few[:0]
	for _, r := range records {
		if r.poll == nil {
			continue
		}
		if f := r.poll.frame; f != nil && !slices.Contains(frames, f) {
			frames = append(frames, f)
		}
	}
	for _, f := range frames {
		f.recycle()
	}
}

// pollFrame is a poll reply as read from the stream, and the records
// decoded from it. The keys, values and headers of the records are slices
// of it, so it is handed back for later replies (Recycle) only when the
// application says it is done with them, and the records with it.
type pollFrame struct {
	buf      []byte
	slabs    [][]Record  // the records, per partition
	lists    [][]*Record // the slices handing them out
	recycled atomic.Bool
}

// recycle hands the reply's buffer back to the transport, and its records
// to later decodings, once.
func (f *pollFrame) recycle() {
	if f == nil || !f.recycled.CompareAndSwap(false, true) {
		return
	}
	quic.RecycleFrame(f.buf)
	spare := &spareRecords
	spare.mu.Lock()
	for _, s := range f.slabs {
		putSpare(&spare.slabs, s)
	}
	for _, l := range f.lists {
		putSpare(&spare.lists, l)
	}
	spare.mu.Unlock()
	f.slabs, f.lists = nil, nil
}

// spareRecords are the record arrays of recycled polls. A replay of 1 KiB
// records decodes some 4,000 of them per 4 MiB poll: half a megabyte of
// records and pointers, which the collector would otherwise zero and scan
// again for every poll.
var spareRecords struct {
	mu    sync.Mutex
	slabs [][]Record
	lists [][]*Record
}

// maxSpareRecordArrays bounds the spare arrays of each kind: enough for a
// few consumers, or a poll of a few partitions, in flight at once.
const maxSpareRecordArrays = 8

// recordArrays returns empty arrays for n records, recycled ones where a
// spare holds n.
func recordArrays(n int) ([]Record, []*Record) {
	spare := &spareRecords
	spare.mu.Lock()
	slab, list := takeSpare(&spare.slabs, n), takeSpare(&spare.lists, n)
	spare.mu.Unlock()
	if slab == nil {
		slab = make([]Record, 0, n)
	}
	if list == nil {
		list = make([]*Record, 0, n)
	}
	return slab, list
}

// takeSpare removes and returns a spare array of capacity n or more, the
// latest first, or nil.
func takeSpare[T any](spares *[][]T, n int) []T {
	s := *spares
	for i := len(s) - 1; i >= 0; i-- {
		if b := s[i]; cap(b) >= n {
			s[i] = s[len(s)-1]
			s[len(s)-1] = nil
			*spares = s[:len(s)-1]
			return b
		}
	}
	return nil
}

// putSpare keeps b, emptied, as a spare, if fewer than
// maxSpareRecordArrays are kept.
func putSpare[T any](spares *[][]T, b []T) {
	if len(*spares) < maxSpareRecordArrays {
		*spares = append(*spares, b[:0])
	}
}
