package engine

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ledgemq/ledge/record"
)

// Reads are planned on the owner and executed anywhere. PlanRead resolves
// the position under the partition lock and captures what the read needs —
// cached batches, or a referenced segment with a byte range — and nothing
// that can change engine state. Execute does the file read on a bounded
// pool of readers and returns whole stored batches in a buffer of its own:
// nothing the engine holds aliases it, and nothing the caller does to it
// reaches the engine. Batches served from the tail cache are shared with
// the cache; the engine never modifies them, and callers must not either.
// A large sequential read may find its bytes read already (readAhead);
// they are then its own just the same.

// ReadPlan is a read resolved on the owner. It holds a reference on the
// segment it reads; Release drops it. A plan may be executed more than once.
type ReadPlan struct{ x *readPlan }

type readPlan struct {
	p        *Partition
	from, hw uint64
	maxBytes int
	cached   [][]byte
	seg      *segment
	pos      int64
	limit    int64  // logical size of the segment at planning
	segEnd   uint64 // Next when the segment holds nothing at or after from
	empty    bool
	next     uint64
	released atomic.Bool
	hdr      [record.BatchHeaderSize]byte // scratch for peeking at a header
}

// ReadResult is what a read returns: whole stored batches, in offset
// order, and the offset to read next. Immutable: see the package comment.
type ReadResult struct {
	Batches [][]byte
	Next    uint64
	pooled  *[]byte
	e       *Engine
}

// Release gives the result's memory back to the engine for later reads.
// The batches must not be used afterwards. Calling it is optional (without
// it the memory is garbage collected) and it is a no-op for results that
// share the tail cache or a caller's buffer.
func (r *ReadResult) Release() {
	if r.pooled != nil {
		r.e.putReadBuf(r.pooled)
		r.pooled, r.Batches = nil, nil
	}
}

// readBufBytes bounds the pooled read buffers: a read of up to 1 MiB plus
// the index spacing fits.
const readBufBytes = 1<<20 + 64<<10

// bigBufs keeps the buffers of reads larger than readBufBytes (a replay's
// polls, several MiB each, and their reads ahead) that released results
// gave back, up to bigBufBudget bytes. A sync.Pool would lose them at
// every garbage collection, and such reads are what makes collections
// frequent: each allocated (and zeroed) its buffer anew.
type bigBufs struct {
	mu    sync.Mutex
	free  []*[]byte
	bytes int
}

const bigBufBudget = 32 << 20

// get returns a buffer of length n: a free one large enough, or a new
// one with its capacity rounded up to a MiB so that it fits reads of
// nearby sizes later.
func (b *bigBufs) get(n int) *[]byte {
	b.mu.Lock()
	for i, v := range b.free {
		if cap(*v) >= n {
			last := len(b.free) - 1
			b.free[i], b.free[last] = b.free[last], nil
			b.free = b.free[:last]
			b.bytes -= cap(*v)
			b.mu.Unlock()
			*v = (*v)[:n]
			return v
		}
	}
	b.mu.Unlock()
	s := make([]byte, n, (n+1<<20-1)&^(1<<20-1))
	return &s
}

// put keeps v for a later get, unless the budget is spent.
func (b *bigBufs) put(v *[]byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bytes+cap(*v) > bigBufBudget {
		return
	}
	b.free = append(b.free, v)
	b.bytes += cap(*v)
}

// putReadBuf gives a read buffer back to the pool it came from.
func (e *Engine) putReadBuf(v *[]byte) {
	if cap(*v) <= readBufBytes {
		e.readBufs.Put(v)
		return
	}
	e.bigBufs.put(v)
}

// From returns the offset the plan reads from.
func (r ReadPlan) From() uint64 {
	if r.x == nil {
		return 0
	}
	return r.x.from
}

// HighWatermark returns the high watermark when the plan was made; the
// read returns nothing at or above it.
func (r ReadPlan) HighWatermark() uint64 {
	if r.x == nil {
		return 0
	}
	return r.x.hw
}

// PlanRead plans a read of at least one whole batch (if any) and up to
// about maxBytes, from offset from. An offset below the log start or above
// the high watermark is an *OutOfRangeError carrying both; from equal to
// the high watermark plans an empty read (a long poll waits on Changed).
func (p *Partition) PlanRead(from uint64, maxBytes int) (ReadPlan, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.corrupt != nil {
		return ReadPlan{}, p.corrupt
	}
	if p.closing != nil {
		return ReadPlan{}, p.closing
	}
	hw := p.hwLocked()
	if from < p.start || from > hw {
		return ReadPlan{}, &OutOfRangeError{Offset: from, Start: p.start, HW: hw}
	}
	x := &readPlan{p: p, from: from, hw: hw, maxBytes: max(maxBytes, 1)}
	if from == hw {
		p.tailWanted()
		x.empty, x.next = true, hw
		return ReadPlan{x}, nil
	}
	if b, next, ok := p.tailReadLocked(from, hw, x.maxBytes); ok {
		p.tailWanted()
		x.cached, x.next = b, next
		return ReadPlan{x}, nil
	}
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].base > from }) - 1
	if i < 0 {
		i = 0
	}
	for i < len(p.segs) && p.segs[i].end <= from {
		i++
	}
	if i == len(p.segs) {
		// A gap at the end of the log (offsets lost or refused): nothing to
		// read below the high watermark.
		x.empty, x.next = true, hw
		return ReadPlan{x}, nil
	}
	seg := p.segs[i]
	x.seg, x.pos, x.limit = seg, seg.posFor(from), seg.size
	x.segEnd = min(seg.end, hw)
	if i+1 < len(p.segs) {
		x.segEnd = min(p.segs[i+1].base, hw)
	}
	seg.acquire()
	return ReadPlan{x}, nil
}

// Release drops the plan's reference on its segment. Idempotent.
func (r ReadPlan) Release() {
	if r.x == nil || !r.x.released.CompareAndSwap(false, true) {
		return
	}
	if r.x.seg != nil {
		r.x.seg.release()
	}
}

// Execute performs the read. File reads take a slot of the engine's
// reader pool (waiting for one honors ctx). The result's batches are in a
// buffer of their own.
func (r ReadPlan) Execute(ctx context.Context) (ReadResult, error) {
	return r.execute(ctx, nil, true)
}

// ExecuteInto is Execute reading into buf when it is large enough (about
// maxBytes plus the index spacing), so a caller that is done with a
// previous result can reuse its memory. The engine keeps no reference to
// buf. Results served from the tail cache do not use buf.
func (r ReadPlan) ExecuteInto(ctx context.Context, buf []byte) (ReadResult, error) {
	return r.execute(ctx, buf, false)
}

// execute reads in three steps, each a method below: the plans that need
// no file read are answered at once (answered); otherwise the first
// bytes are read (firstRead: the read ahead made for this read, or one
// read sized to take the first batch whole), and the whole batches in
// range are collected from them, reading on where they run out
// (collect). Every file read goes through readAt: the BeforeRead hook,
// then a slot of the reader pool.
func (r ReadPlan) execute(ctx context.Context, buf []byte, pool bool) (ReadResult, error) {
	x := r.x
	if res, done, err := x.answered(); done {
		return res, err
	}
	e := x.p.e
	first, err := x.firstRead(ctx, buf, pool)
	if err != nil {
		return ReadResult{}, err
	}
	res := ReadResult{Next: x.segEnd, pooled: first.pooled, e: e}
	if first.pooled != nil && &first.buf[0] != &(*first.pooled)[0] {
		e.putReadBuf(first.pooled)
		res.pooled = nil
	}
	batchesEnd, err := x.collect(ctx, first, &res)
	if err != nil {
		return ReadResult{}, err
	}
	if pool && batchesEnd >= 0 {
		x.startAhead(batchesEnd, res.Next, first.chunk)
	}
	if res.Next >= x.hw {
		x.p.tailWanted() // a consumer keeping up: cache what comes next
	}
	return res, nil
}

// answered returns the result of a plan that reads no file: no plan, a
// released one, an empty read or one served from the tail cache.
func (x *readPlan) answered() (res ReadResult, done bool, err error) {
	switch {
	case x == nil:
		return ReadResult{}, true, nil
	case x.released.Load():
		return ReadResult{}, true, ErrReleased
	case x.empty:
		return ReadResult{Next: x.next}, true, nil
	case x.cached != nil:
		return ReadResult{Batches: x.cached, Next: x.next}, true, nil
	}
	return ReadResult{}, false, nil
}

// readBytes is bytes of a segment file, as a read step hands them on.
type readBytes struct {
	buf    []byte
	pos    int64   // file position of buf[0]
	pooled *[]byte // buf's buffer when it came from the engine's pools
	chunk  int     // the size of a read at this plan
}

// firstRead returns the read's first bytes: those of the read ahead made
// for it, or one read of chunk bytes from the plan's position, into buf
// when it is large enough (or a pooled buffer, with pool).
func (x *readPlan) firstRead(ctx context.Context, buf []byte, pool bool) (readBytes, error) {
	e := x.p.e
	rb := readBytes{pos: x.pos, chunk: int(min(x.limit-x.pos, int64(x.maxBytes)+int64(e.opts.IndexIntervalBytes)+record.BatchHeaderSize))}
	if pool {
		ra, err := x.takeAhead(ctx)
		if err != nil {
			return readBytes{}, err
		}
		if ra != nil {
			rb.buf, rb.pos, rb.pooled = ra.buf, ra.pos, ra.pooled
			return rb, nil
		}
	}
	if x.maxBytes < 64<<10 && x.limit-x.pos >= record.BatchHeaderSize {
		// A small read: learn the first batch's length, so that one read
		// (one buffer) takes it whole whatever the batch size. A header
		// that does not parse is left to collect, which names the damage.
		hdr, err := x.readAt(ctx, x.pos, record.BatchHeaderSize, x.hdr[:])
		if err != nil {
			return readBytes{}, err
		}
		if h, err := record.ParseBatchHeader(hdr); err == nil {
			rb.chunk = int(min(x.limit-x.pos, max(int64(rb.chunk), int64(h.Length)+int64(x.maxBytes))))
		}
	}
	rb.pooled = x.readBuf(pool, rb.chunk)
	if rb.pooled != nil {
		buf = *rb.pooled
	}
	var err error
	if rb.buf, err = x.readAt(ctx, rb.pos, rb.chunk, buf); err != nil {
		if rb.pooled != nil {
			e.putReadBuf(rb.pooled)
		}
		return readBytes{}, err
	}
	return rb, nil
}

// collect appends to res the whole batches of the plan's range that
// follow in rb (at least one if any, up to about maxBytes, none at or
// past the high watermark), reading on when rb ends before the first
// batch does. It returns the file position after the last batch taken
// (-1 if none).
func (x *readPlan) collect(ctx context.Context, rb readBytes, res *ReadResult) (int64, error) {
	buf, pos := rb.buf, rb.pos
	total, off := 0, 0
	batchesEnd := int64(-1)
	var err error
	for {
		at := pos + int64(off)
		if at >= x.limit {
			break
		}
		if len(buf)-off < record.BatchHeaderSize {
			if len(res.Batches) > 0 {
				break
			}
			pos, off = at, 0
			if buf, err = x.readAt(ctx, at, int(min(x.limit-at, int64(rb.chunk))), nil); err != nil {
				return -1, err
			}
			if len(buf) < record.BatchHeaderSize {
				return -1, &CorruptLogError{File: x.seg.path, Pos: at, Reason: "a batch header runs past the end of the log"}
			}
			continue
		}
		h, err := record.ParseBatchHeader(buf[off:])
		if err == nil && int64(h.Length) > x.limit-at {
			err = fmt.Errorf("a batch of %d bytes runs past the end of the log", h.Length)
		}
		if err != nil {
			return -1, &CorruptLogError{File: x.seg.path, Pos: at, Reason: err.Error()}
		}
		if h.LastOffset() >= x.hw {
			break
		}
		if int(h.Length) > len(buf)-off {
			if len(res.Batches) > 0 {
				break
			}
			pos, off = at, 0
			if buf, err = x.readAt(ctx, at, int(min(x.limit-at, max(int64(h.Length), int64(rb.chunk)))), nil); err != nil {
				return -1, err
			}
			continue
		}
		if h.LastOffset() >= x.from {
			end := off + int(h.Length)
			res.Batches = append(res.Batches, buf[off:end:end])
			res.Next = h.LastOffset() + 1
			total += int(h.Length)
			batchesEnd = at + int64(h.Length)
			if total >= x.maxBytes {
				break
			}
		}
		off += int(h.Length)
	}
	return batchesEnd, nil
}

// readBuf returns a buffer from the engine's pools for a read of n bytes
// that Release can give back, or nil when the read takes a buffer of its
// own (a small one: copying it costs less than keeping a buffer).
func (x *readPlan) readBuf(pool bool, n int) *[]byte {
	if !pool || n < readBufBytes/4 {
		return nil
	}
	if n > readBufBytes {
		return x.p.e.bigBufs.get(n)
	}
	if v, ok := x.p.e.readBufs.Get().(*[]byte); ok && cap(*v) >= n {
		return v
	}
	b := make([]byte, n)
	return &b
}

// A consumer replaying a log reads it in large sequential reads, each
// sent to it before it asks for the next; the file read would otherwise
// sit between every two replies. So a large read that stops inside a
// segment starts the read of what follows (a read ahead), and the
// partition's next read from exactly there takes its bytes instead of
// reading. The bytes of a segment below its logical size never change, so
// they are what the next read would have read; the next read still
// checks them against its own plan (high watermark, logical size).
//
// Only reads larger than the engine's read buffers read ahead (a
// replay's polls, several MiB each), where the file read is long enough
// to matter; a read ahead takes its buffer from the large reads' pool and
// the result that takes it gives it back. A partition has at most one
// read ahead; one that no read takes within readAheadTTL is dropped (its
// buffer left to the garbage collector), so memory stays bounded by the
// partitions read sequentially in that time. Reads through
// Options.BeforeRead (tests and fault injection) never read ahead.
type readAhead struct {
	seg    *segment
	pos    int64  // file position of buf[0]: where a batch starts
	from   uint64 // the offset of the first record at pos or later
	done   chan struct{}
	buf    []byte  // set before done is closed; nil if the read failed
	pooled *[]byte // buf's buffer, for the taking result to give back
}

const readAheadTTL = 500 * time.Millisecond

// startAhead starts reading n bytes at pos, where the batch holding from
// (the result's Next) starts, unless the read is a small one, the segment
// ends there or the partition already has a read ahead.
func (x *readPlan) startAhead(pos int64, from uint64, n int) {
	p, e := x.p, x.p.e
	if n <= readBufBytes || e.opts.BeforeRead != nil {
		return
	}
	p.mu.Lock()
	size := x.seg.size
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].base >= x.seg.base })
	live := i < len(p.segs) && p.segs[i] == x.seg // not removed by retention or a purge
	if p.closing != nil || p.corrupt != nil || p.tail.ahead != nil || !live || size-pos < record.BatchHeaderSize {
		p.mu.Unlock()
		return
	}
	n = int(min(int64(n), size-pos))
	ra := &readAhead{seg: x.seg, pos: pos, from: from, done: make(chan struct{})}
	p.tail.ahead = ra
	x.seg.acquire() // under p.mu, while the segment is the partition's
	p.mu.Unlock()
	go func() {
		defer close(ra.done)
		defer ra.seg.release()
		// A plan of its own, so that nothing of the caller's plan is
		// shared with the read ahead.
		rx := &readPlan{p: p, seg: ra.seg}
		pooled := e.bigBufs.get(n)
		if buf, err := rx.readAt(context.Background(), pos, n, *pooled); err == nil {
			ra.buf, ra.pooled = buf, pooled
		} else {
			e.bigBufs.put(pooled)
		}
	}()
	time.AfterFunc(readAheadTTL, func() {
		p.mu.Lock()
		if p.tail.ahead == ra {
			p.tail.ahead = nil
		}
		p.mu.Unlock()
	})
}

// takeAhead returns the partition's read ahead once it is done, if it
// was made for this read: same segment, same position. One this read is
// past is dropped (its reader moved on, so this read may start its own);
// one ahead of it is left for the reader it was made for, as another
// consumer may follow behind that one.
func (x *readPlan) takeAhead(ctx context.Context) (*readAhead, error) {
	p := x.p
	p.mu.Lock()
	ra := p.tail.ahead
	if ra == nil || ra.seg != x.seg || ra.from != x.from || ra.pos >= x.limit {
		if ra != nil && x.from > ra.from && x.seg.base >= ra.seg.base {
			p.tail.ahead = nil
		}
		p.mu.Unlock()
		return nil, nil
	}
	p.tail.ahead = nil
	p.mu.Unlock()
	select {
	case <-ra.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if ra.buf == nil {
		return nil, nil
	}
	// The result owns the bytes from now on: the read ahead's timer
	// keeps no reference to them.
	got := *ra
	ra.buf, ra.pooled = nil, nil
	return &got, nil
}

// readAt reads n bytes at pos, into dst if it is large enough.
func (x *readPlan) readAt(ctx context.Context, pos int64, n int, dst []byte) ([]byte, error) {
	e := x.p.e
	if e.opts.BeforeRead != nil {
		if err := e.opts.BeforeRead(ctx, ReadInfo{Topic: x.p.t.name, Partition: x.p.index, File: x.seg.path, Pos: pos, Len: n}); err != nil {
			return nil, err
		}
	}
	select {
	case e.readers <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-e.readers }()
	buf := dst[:0]
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	m, err := x.seg.rf.ReadAt(buf, pos)
	if m == n {
		return buf, nil
	}
	if err == nil {
		err = fmt.Errorf("short read")
	}
	return nil, fmt.Errorf("engine: read %s at %d: %w", x.seg.path, pos, err)
}

// OffsetForTime returns the offset of the first batch whose records may
// have a timestamp at or after ts: the first batch at which the running
// maximum timestamp of the log reaches ts (the high watermark if none
// does). The index finds the place in O(log n); a short scan of batch
// headers from there finds the batch.
func (p *Partition) OffsetForTime(ctx context.Context, ts int64) (uint64, error) {
	p.mu.Lock()
	if p.corrupt != nil {
		p.mu.Unlock()
		return 0, p.corrupt
	}
	hw := p.hwLocked()
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].maxTS >= ts })
	if i == len(p.segs) {
		p.mu.Unlock()
		return hw, nil
	}
	seg := p.segs[i]
	x := &readPlan{p: p, seg: seg, pos: seg.posForTime(ts), limit: seg.size, hw: hw}
	start := p.start
	seg.acquire()
	p.mu.Unlock()
	defer seg.release()
	pos := x.pos
	for pos < x.limit {
		n := int(min(x.limit-pos, 64<<10))
		buf, err := x.readAt(ctx, pos, n, nil)
		if err != nil {
			return 0, err
		}
		off := 0
		for off+record.BatchHeaderSize <= len(buf) {
			h, err := record.ParseBatchHeader(buf[off:])
			if err != nil {
				return 0, &CorruptLogError{File: seg.path, Pos: pos + int64(off), Reason: err.Error()}
			}
			if h.BaseOffset >= hw {
				return hw, nil
			}
			if h.MaxTimestamp >= ts {
				return max(h.BaseOffset, start), nil
			}
			off += int(h.Length)
		}
		if off == 0 {
			break
		}
		pos += int64(off)
	}
	return max(min(seg.end, hw), start), nil
}
