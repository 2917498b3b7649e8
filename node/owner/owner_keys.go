package owner

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ledgemq/ledge/record"
)

// KeyMatch names the records a poll wants by their key: those whose key
// is Key, or, with Prefix, starts with Key. A KeyMatch with an empty Key
// wants every record; otherwise a record with a null key matches none.
//
// A key poll is planned, read and completed like any other; its reply is
// node-built batches of the matching records (as a filter plugin's is) and
// its Next is past every record it read, matching or not. A read that kept
// none is followed by the next, from past it, until one keeps a record or
// the poll reaches the high watermark, where an immediate poll answers and
// a long poll parks. Parked, it waits in the owner's key index and wakes
// only for an append holding a record it matches: its cost does not grow
// with the polls parked beside it.
type KeyMatch struct {
	Key    []byte
	Prefix bool
}

// Keyed reports whether k selects records by key.
func (k KeyMatch) Keyed() bool { return len(k.Key) > 0 }

// Matches reports whether a record with key key is one k wants.
func (k KeyMatch) Matches(key []byte) bool {
	switch {
	case len(k.Key) == 0:
		return true
	case key == nil:
		return false
	case k.Prefix:
		return bytes.HasPrefix(key, k.Key)
	}
	return bytes.Equal(key, k.Key)
}

// KeyPollStats counts the key polls of a partition.
type KeyPollStats struct {
	// Parked is how many key polls wait in the index now.
	Parked int
	// Woken counts the wake-ups of parked key polls since the owner
	// started: by a record of their key (once, also when the poll then
	// waits for the high watermark to reach it), by a change of the
	// partition's world (a purge), or by the high watermark passing an
	// append they may have missed while they parked. Divided by the
	// records appended, it is the wake-ups per command.
	Woken uint64
}

// KeyPolls returns the partition's key poll counters.
func (o *Owner) KeyPolls() KeyPollStats {
	o.keys.mu.Lock()
	defer o.keys.mu.Unlock()
	return KeyPollStats{Parked: o.keys.parked, Woken: o.keys.woken.Load()}
}

// keyWaiter is one parked key poll.
type keyWaiter struct {
	key    string // the poll's key, its own copy
	prefix bool
	// from: records below it are not the poll's (it read past them).
	from uint64
	woke chan struct{}
	// at and until, set before woke is closed: no record in [from, at)
	// matches the poll (every one was scanned against it), and a record
	// it matches lies in [at, until).
	at, until uint64
	done      bool
	// alone is the index's list of the poll's key while it is the key's
	// only poll (a device's): such a key needs no list of its own.
	alone [1]*keyWaiter
}

// keyIndex holds a partition's parked key polls by key, so that an append
// wakes only the polls of the keys it holds. Its lock is taken inside the
// owner's and the append lock, never around them.
type keyIndex struct {
	mu     sync.Mutex
	exact  map[string][]*keyWaiter
	prefix map[string][]*keyWaiter
	// prefixLens counts the parked prefix polls by prefix length: a
	// record's key is looked up once per length in use.
	prefixLens map[int]int
	parked     int
	// scanned is one past the last offset of the appends scanned: a poll
	// that would park at a position below it may have missed one, and
	// waits for the high watermark to pass it instead.
	scanned uint64
	it      record.RecordIterator
	woken   atomic.Uint64
}

// park registers a key poll from position from. It returns nil, and the
// offset the poll must see the high watermark reach first, when an append
// at or after from was scanned before the poll could be in the index.
func (x *keyIndex) park(k KeyMatch, from uint64) (*keyWaiter, uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.scanned > from {
		return nil, x.scanned
	}
	if x.exact == nil {
		x.exact, x.prefix, x.prefixLens = map[string][]*keyWaiter{}, map[string][]*keyWaiter{}, map[int]int{}
	}
	w := &keyWaiter{key: string(k.Key), prefix: k.Prefix, from: from, woke: make(chan struct{})}
	m := x.exact
	if w.prefix {
		m = x.prefix
		x.prefixLens[len(w.key)]++
	}
	if ws, ok := m[w.key]; ok {
		m[w.key] = append(ws, w)
	} else {
		w.alone[0] = w
		m[w.key] = w.alone[:1:1]
	}
	x.parked++
	return w, 0
}

// remove takes w out of the index. Called with x.mu held.
func (x *keyIndex) remove(w *keyWaiter) {
	m := x.exact
	if w.prefix {
		m = x.prefix
	}
	ws := m[w.key]
	i := slices.Index(ws, w)
	if i < 0 {
		return
	}
	if len(ws) == 1 {
		delete(m, w.key)
	} else {
		m[w.key] = slices.Delete(ws, i, i+1)
	}
	if w.prefix {
		if x.prefixLens[len(w.key)]--; x.prefixLens[len(w.key)] == 0 {
			delete(x.prefixLens, len(w.key))
		}
	}
	x.parked--
}

// unpark takes a poll that stops waiting out of the index; it reports
// whether the poll had been woken.
func (x *keyIndex) unpark(w *keyWaiter) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if w.done {
		return true
	}
	w.done = true
	x.remove(w)
	return false
}

// wake wakes w for a record in [at, until). Called with x.mu held.
func (x *keyIndex) wake(w *keyWaiter, at, until uint64) {
	if w.done {
		return
	}
	w.done, w.at, w.until = true, max(at, w.from), until
	x.remove(w)
	close(w.woke)
}

// appended scans an appended batch, whose records are at [base, last],
// and wakes the parked polls of its keys. A batch that cannot be read
// wakes every poll it could concern: they read it and judge.
func (x *keyIndex) appended(batch []byte, base, last uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.scanned = max(x.scanned, last+1)
	if x.parked == 0 {
		return
	}
	if err := x.it.Reset(batch, record.BatchMaxSize); err != nil {
		x.wakeFrom(last, base, last+1)
		return
	}
	shift := base - x.it.Header().BaseOffset
	for {
		r, ok := x.it.Next()
		if !ok {
			break
		}
		if r.Key == nil {
			continue
		}
		off := r.Offset + shift
		x.wakeSome(x.exact[string(r.Key)], off, off, last+1)
		for n := range x.prefixLens {
			if n <= len(r.Key) {
				x.wakeSome(x.prefix[string(r.Key[:n])], off, off, last+1)
			}
		}
		if x.parked == 0 {
			break
		}
	}
	if x.it.Err() != nil {
		x.wakeFrom(last, base, last+1)
	}
}

// wakeSome wakes the polls of ws that read from off or before, for a
// record in [at, until). Called with x.mu held; ws is a slice of the
// index, which waking changes.
func (x *keyIndex) wakeSome(ws []*keyWaiter, off, at, until uint64) {
	if len(ws) == 1 { // one device's key: nothing to copy
		if w := ws[0]; w.from <= off {
			x.wake(w, at, until)
		}
		return
	}
	for _, w := range slices.Clone(ws) {
		if w.from <= off {
			x.wake(w, at, until)
		}
	}
}

// wakeFrom wakes every parked poll that reads from off or before, for a
// record that may lie anywhere from at (each poll's own from, if
// higher). Called with x.mu held.
func (x *keyIndex) wakeFrom(off, at, until uint64) {
	for _, m := range []map[string][]*keyWaiter{x.exact, x.prefix} {
		for _, ws := range m {
			x.wakeSome(ws, off, at, until)
		}
	}
}

// wakeAll wakes every parked poll, to re-validate its world (a purge).
func (x *keyIndex) wakeAll() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.wakeFrom(^uint64(0), 0, 0)
}

// keyFiltered returns node-built batches of the records of batches at or
// after from whose key k matches: original offsets and timestamps, no
// producer, uncompressed, each at most maxBatch bytes (a larger single
// record gets a batch of its own). They are copies: the stored batches
// may be released once it returned.
func keyFiltered(batches [][]byte, from uint64, k KeyMatch, maxBatch int) ([][]byte, error) {
	var out [][]byte
	var b record.BatchBuilder
	var it record.RecordIterator
	flush := func() error {
		if b.Len() == 0 {
			return nil
		}
		nb, err := b.Build(record.CompressionNone)
		if err != nil {
			return fmt.Errorf("owner: building a key poll's batch: %w", err)
		}
		out = append(out, nb)
		b.Reset()
		return nil
	}
	var base uint64
	for _, sb := range batches {
		if err := it.Reset(sb, record.BatchMaxSize); err != nil {
			return nil, err
		}
		for {
			r, ok := it.Next()
			if !ok {
				break
			}
			if r.Offset < from || !k.Matches(r.Key) {
				continue
			}
			size := 32 + len(r.Key) + len(r.Value)
			for _, h := range r.Headers {
				size += 16 + len(h.Key) + len(h.Value)
			}
			if b.Len() > 0 && (b.Size()+size > maxBatch || r.Offset-base > 1<<32-1) {
				if err := flush(); err != nil {
					return nil, err
				}
			}
			if b.Len() == 0 {
				base = r.Offset
			}
			b.AppendWithOffset(r)
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}
