package owner

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
)

// The in-memory log's state stores: keys "st/<partition>/" + the
// length-prefixed consumer + the state key, written in one metadata step
// with the bookmark, as the engine writes them in one batch.

// apply writes puts and deletes (a nil value deletes) as one step of the
// metadata: one ticket, all visible at once, all durable with one Sync.
func (m *memMeta) apply(writes []metaWrite) Ticket {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	for _, w := range writes {
		w.seq = m.seq
		if w.del {
			delete(m.data, w.key)
		} else {
			m.data[w.key] = []byte(w.value)
		}
		m.log = append(m.log, w)
	}
	return m.seq
}

// statePrefix is the key prefix of consumer's state store on l.
func (l *memLog) statePrefix(consumer string) string {
	k := binary.AppendUvarint([]byte("st/"+strings.TrimPrefix(l.key, "bm/")), uint64(len(consumer)))
	return string(append(k, consumer...))
}

func (l *memLog) SetBookmarkState(consumer string, b Bookmark, changes []StateChange) (Ticket, error) {
	ws := make([]metaWrite, 0, 1+len(changes))
	ws = append(ws, metaWrite{key: l.key + consumer, value: bookmarkText(b)})
	pre := l.statePrefix(consumer)
	for _, c := range changes {
		ws = append(ws, metaWrite{key: pre + string(c.Key), value: string(c.Value), del: c.Delete})
	}
	return l.meta.apply(ws), nil
}

func (l *memLog) ScanState(consumer string, prefix []byte, fn func(k, v []byte) error) error {
	pre := l.statePrefix(consumer)
	return l.meta.Scan([]byte(pre+string(prefix)), func(k, v []byte) error {
		return fn(k[len(pre):], v)
	})
}

func (l *memLog) DeleteConsumer(consumer string) (Ticket, error) {
	pre := l.statePrefix(consumer)
	ws := []metaWrite{{key: l.key + consumer, del: true}}
	l.meta.mu.Lock()
	var keys []string
	for k := range l.meta.data {
		if strings.HasPrefix(k, pre) {
			keys = append(keys, k)
		}
	}
	l.meta.mu.Unlock()
	sort.Strings(keys)
	for _, k := range keys {
		ws = append(ws, metaWrite{key: k, del: true})
	}
	return l.meta.apply(ws), nil
}

// bookmarkText is the in-memory log's bookmark encoding.
func bookmarkText(b Bookmark) string { return fmt.Sprintf("%d@%d", b.Offset, b.History) }
