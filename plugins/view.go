package plugins

import (
	"fmt"
	"math"
	"sync"

	"github.com/ledgemq/ledge/plugins/abi"
	"github.com/ledgemq/ledge/record"
)

// PollResult is a poll result as the node read it: the input of plugin
// calls.
type PollResult struct {
	Topic     string
	Partition int32
	// From is the position the poll read from. Records below it (the first
	// stored batch may start earlier) are not delivered and not shown to
	// plugins.
	From uint64
	// Next is the position after the result: where the consumer continues,
	// past records a filter drops. Records at or past it are not shown.
	// 0 means "after the last record".
	Next uint64
	// Batches are whole stored batches, as the engine returned them.
	Batches [][]byte
	// MaxBatchBytes bounds each batch when verifying it; 0 means
	// record.BatchMaxSize.
	MaxBatchBytes int
}

// View is a poll result prepared for plugin calls: decoded once and laid
// out in the ABI's input format, ready to be copied into an instance. A
// View is immutable and safe for concurrent use; calls on several plugins
// may share one. Release hands its memory back for later views.
type View struct {
	region []byte
	abi    abi.View
	bufs   *viewBufs
}

// viewBufs are the buffers a view is built in: the encoder's sections and
// the region. A poll's view is a few MiB, laid out, copied into an
// instance and dropped within the poll; a fresh, zeroed allocation per
// poll cost a filtered replay more CPU than its plugin calls.
type viewBufs struct {
	enc    abi.Encoder
	it     record.RecordIterator
	arena  []byte // compressed batches' records, decompressed
	region []byte
}

var viewPool = sync.Pool{New: func() any { return new(viewBufs) }}

// maxPooledView is the largest region (or arena) a released view hands
// back (MaxInputBytes is 16 MiB by default).
const maxPooledView = 32 << 20

// Release hands the view's memory back for a later view, once every call
// on it has returned and nothing read from it (records, their keys and
// values) is used any more; Filtered's batches do not share it. The view
// must not be used after. Releasing is optional: a view that is not
// released is garbage collected.
func (v *View) Release() {
	b := v.bufs
	if b == nil {
		return
	}
	v.bufs, v.region, v.abi = nil, nil, abi.View{}
	b.put()
}

// put hands b back to the pool, unless it grew too large, letting go of
// the records its encoder referred to.
func (b *viewBufs) put() {
	if cap(b.region) > maxPooledView || cap(b.arena) > maxPooledView {
		return
	}
	b.enc.Reset(abi.Meta{})
	viewPool.Put(b)
}

// NewView decodes r's batches (verifying each) and prepares the view. An
// error means the batches are corrupt (record.ErrCorruptBatch and friends).
func NewView(r PollResult) (*View, error) {
	bufs := viewPool.Get().(*viewBufs)
	v, err := bufs.build(r)
	if err != nil {
		bufs.put()
		return nil, err
	}
	return v, nil
}

func (bufs *viewBufs) build(r PollResult) (*View, error) {
	enc, it := &bufs.enc, &bufs.it
	next := r.Next
	if next == 0 {
		next = math.MaxUint64
	}
	enc.Reset(abi.Meta{Topic: r.Topic, Partition: r.Partition, From: r.From, Next: r.Next})
	// Reserve from the headers. The encoder refers to the records' bytes
	// until the region is written: an uncompressed batch's stay where
	// they are, and a compressed batch's are copied out of the iterator's
	// buffer (which the next batch reuses) into an arena reserved for all
	// of them, which therefore never moves.
	records, packed := 0, 0
	for _, b := range r.Batches {
		if h, err := record.ParseBatchHeader(b); err == nil {
			records += int(h.RecordCount)
			if h.Compression() != record.CompressionNone {
				packed += int(h.UncompressedLen)
			}
		}
	}
	enc.Grow(min(records, 1<<20))
	if cap(bufs.arena) < packed {
		bufs.arena = make([]byte, 0, packed)
	}
	arena := bufs.arena[:0]
	keep := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		if len(arena)+len(b) > cap(arena) {
			// Not with batches true to their headers (Reset checks the
			// size they decompress to); a copy of its own keeps it right.
			return append([]byte(nil), b...)
		}
		at := len(arena)
		arena = append(arena, b...)
		return arena[at:len(arena):len(arena)]
	}
	var last uint64
	for bi, b := range r.Batches {
		if err := it.Reset(b, r.MaxBatchBytes); err != nil {
			return nil, fmt.Errorf("plugins: batch %d of the poll result: %w", bi, err)
		}
		copied := it.Header().Compression() != record.CompressionNone
		for {
			rec, ok := it.Next()
			if !ok {
				break
			}
			if rec.Offset < r.From || rec.Offset >= next {
				continue
			}
			last = rec.Offset
			if copied {
				rec.Key, rec.Value = keep(rec.Key), keep(rec.Value)
			}
			enc.Add(rec.Offset, rec.Timestamp, rec.Key, rec.Value)
			for _, h := range rec.Headers {
				v := h.Value
				if copied {
					v = keep(v)
				}
				enc.AddHeader(h.Key, v)
			}
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("plugins: batch %d of the poll result: %w", bi, err)
		}
	}
	if r.Next == 0 {
		m := abi.Meta{Topic: r.Topic, Partition: r.Partition, From: r.From, Next: r.From}
		if enc.Len() > 0 {
			m.Next = last + 1
		}
		enc.SetMeta(m)
	}
	if size := enc.Size(); uint64(size) > math.MaxUint32 {
		return nil, fmt.Errorf("%w: %d bytes", ErrInputTooLarge, size)
	}
	bufs.region = enc.AppendRegion(bufs.region[:0])
	v := &View{region: bufs.region, bufs: bufs}
	var err error
	if v.abi, err = abi.Parse(v.region); err != nil {
		return nil, fmt.Errorf("plugins: %w", err) // a bug of the encoder
	}
	return v, nil
}

// Len returns the number of records in the view.
func (v *View) Len() int { return v.abi.Len() }

// From returns the position the poll read from.
func (v *View) From() uint64 { return v.abi.From() }

// Next returns the position after the result.
func (v *View) Next() uint64 { return v.abi.Next() }

// Size returns the size in bytes of the input region a call copies into
// the plugin.
func (v *View) Size() int { return len(v.region) }

// Record returns record i as the plugin sees it.
func (v *View) Record(i int) abi.Record { return v.abi.Record(i) }

func (v *View) dataLen() int { return len(v.region) }

// Filtered builds the batches of a filtered reply: the records keep
// selects, with their offsets, timestamps, keys, values and headers
// unchanged, in new batches compressed with c, each at most maxBatchBytes
// uncompressed (record.BatchMaxSize when 0; a single larger record gets a
// batch of its own). The producer's batch CRC and compression covered the
// whole stored batch, so a subset is always a new batch. It returns no
// batches when nothing is kept; the reply's next position is Next()
// either way.
func (v *View) Filtered(keep Bitmap, c record.Compression, maxBatchBytes int) ([][]byte, error) {
	if keep.Len() != v.Len() {
		return nil, fmt.Errorf("plugins: bitmap of %d records for a view of %d", keep.Len(), v.Len())
	}
	if maxBatchBytes <= 0 || maxBatchBytes > record.BatchMaxSize {
		maxBatchBytes = record.BatchMaxSize
	}
	// The kept records are copied once: the batches are built in place,
	// one after another, in one buffer sized for all of them.
	need := 0
	for i := 0; i < v.Len(); i++ {
		if keep.Kept(i) {
			need += recordBound(v.abi.Record(i))
		}
	}
	if need == 0 {
		return nil, nil
	}
	buf := make([]byte, 0, need+(need/maxBatchBytes+1)*record.BatchHeaderSize)
	var out [][]byte
	var b record.BatchBuilder
	open := false
	var hdrs []record.Header
	flush := func() error {
		if !open {
			return nil
		}
		open = false
		start := len(buf)
		nb, err := b.FinishInPlace(c)
		if err != nil {
			return fmt.Errorf("plugins: building the filtered batch: %w", err)
		}
		buf = nb
		out = append(out, buf[start:len(buf):len(buf)])
		return nil
	}
	var base uint64
	for i := 0; i < v.Len(); i++ {
		if !keep.Kept(i) {
			continue
		}
		r := v.abi.Record(i)
		hdrs = hdrs[:0]
		size := 32 + len(r.Key()) + len(r.Value())
		for j := 0; j < r.HeaderCount(); j++ {
			k, val := r.Header(j)
			hdrs = append(hdrs, record.Header{Key: string(k), Value: val})
			size += 16 + len(k) + len(val)
		}
		if open && (b.Size()+size > maxBatchBytes || r.Offset()-base > math.MaxUint32) {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		if !open {
			b.ResetInPlace(buf)
			open, base = true, r.Offset()
		}
		rec := record.Record{Offset: r.Offset(), Timestamp: r.Timestamp(), Key: r.Key(), Value: r.Value()}
		if len(hdrs) > 0 {
			rec.Headers = hdrs
		}
		b.AppendWithOffset(rec)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// recordBound is at least the bytes r takes in a batch: its key, value
// and headers with every length and delta at its longest varint.
func recordBound(r abi.Record) int {
	n := 48 + len(r.Key()) + len(r.Value())
	for j := 0; j < r.HeaderCount(); j++ {
		k, val := r.Header(j)
		n += 10 + len(k) + len(val)
	}
	return n
}
