package engine

import (
	"sort"
	"sync/atomic"
)

// The tail cache keeps the most recently written batches of a partition in
// memory, so that consumers keeping up are served without a file read. It
// holds the very slices given to Append (never handed to a file write) in
// write order, so it always covers a contiguous run of the log up to its
// written end. Its memory is bounded across all partitions by
// Options.TailCacheBytes: a partition that adds a batch evicts its own
// oldest ones while the engine is over the budget.
//
// It fills only while someone reads at the tail: a read that reaches the
// high watermark (a consumer that has caught up) or one the cache serves
// keeps it warm for tailWarmMillis. A partition nobody reads
// near its end keeps nothing, so AppendOwned callers get their batches'
// memory back as soon as they are written. A consumer arriving at the tail
// of a cold partition reads the batches written before it from the files
// (normally the page cache), and the cache fills from its first read on.
type tailCache struct {
	ents  []tailEnt
	head  int
	bytes int64
	// ahead is the read started for the partition's next sequential file
	// read (see readAhead), if any.
	ahead *readAhead
	// readAt is when (engine clock, ms) a read last reached the tail; 0:
	// never. Reads set it without the partition's lock.
	readAt atomic.Int64
}

// tailWarmMillis is how long the tail cache keeps filling after the last
// read at the tail. Consumers at the tail read far more often than this.
const tailWarmMillis = 5000

type tailEnt struct {
	base, last uint64
	b          []byte
}

// tailAddLocked caches the written batch q, at engine time now (ms), and
// reports whether it did.
func (p *Partition) tailAddLocked(q *pending, now int64) bool {
	budget := int64(p.e.opts.TailCacheBytes)
	size := int64(len(q.b))
	t := &p.tail
	if readAt := t.readAt.Load(); budget <= 0 || size > budget/2 || readAt == 0 || now-readAt > tailWarmMillis {
		p.tailDropLocked()
		return false
	}
	t.ents = append(t.ents, tailEnt{base: q.base, last: q.last, b: q.b})
	t.bytes += size
	used := p.e.tailUsed.Add(size)
	for (used > budget || t.bytes > budget) && t.head < len(t.ents)-1 {
		used = p.tailEvictLocked()
	}
	return true
}

// tailWanted records a read that reached the tail.
func (p *Partition) tailWanted() {
	p.tail.readAt.Store(max(p.e.clock.now(), 1))
}

// tailEvictLocked drops the oldest cached batch and returns the engine's
// cache usage after it.
func (p *Partition) tailEvictLocked() int64 {
	t := &p.tail
	e := t.ents[t.head]
	t.ents[t.head] = tailEnt{}
	t.head++
	t.bytes -= int64(len(e.b))
	if t.head > 1024 && t.head*2 > len(t.ents) {
		n := copy(t.ents, t.ents[t.head:])
		clear(t.ents[n:])
		t.ents, t.head = t.ents[:n], 0
	}
	return p.e.tailUsed.Add(-int64(len(e.b)))
}

func (p *Partition) tailDropLocked() {
	t := &p.tail
	if t.bytes == 0 && t.head == len(t.ents) {
		return
	}
	p.e.tailUsed.Add(-t.bytes)
	clear(t.ents)
	t.ents, t.head, t.bytes = t.ents[:0], 0, 0
}

// tailDropBelowLocked drops cached batches that end below off.
func (p *Partition) tailDropBelowLocked(off uint64) {
	t := &p.tail
	for t.head < len(t.ents) && t.ents[t.head].last < off {
		p.tailEvictLocked()
	}
}

// tailReadLocked serves a read from the cache if it covers from: whole
// batches below hw, at least one, up to about maxBytes.
func (p *Partition) tailReadLocked(from, hw uint64, maxBytes int) ([][]byte, uint64, bool) {
	t := &p.tail
	ents := t.ents[t.head:]
	if len(ents) == 0 || from < ents[0].base {
		return nil, 0, false
	}
	i := sort.Search(len(ents), func(i int) bool { return ents[i].last >= from })
	if i == len(ents) || ents[i].last >= hw {
		return nil, 0, false
	}
	var out [][]byte
	next, total := from, 0
	for ; i < len(ents) && ents[i].last < hw && (total < maxBytes || len(out) == 0); i++ {
		out = append(out, ents[i].b)
		total += len(ents[i].b)
		next = ents[i].last + 1
	}
	return out, next, true
}

// DropTailCache empties the partition's tail cache, so that the next reads
// go to the files. For tests, and to give memory back.
func (p *Partition) DropTailCache() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tailDropLocked()
}
