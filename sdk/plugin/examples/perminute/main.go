package main

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"

	"github.com/ledgemq/ledge/sdk/plugin"
)

func init() {
	plugin.RegisterTransform(setup)
}

func setup(p plugin.Params) (plugin.Transform, error) {
	if err := p.Only("window"); err != nil {
		return nil, err
	}
	window, err := p.Int("window", 60_000)
	if err != nil {
		return nil, err
	}
	if window <= 0 {
		return nil, errors.New(`parameter "window" must be positive`)
	}
	var w counter
	return func(b *plugin.Batch, s *plugin.State, out *plugin.Output) error {
		if err := w.decode(s.Bytes()); err != nil {
			return err
		}
		for i := 0; i < b.Len(); i++ {
			r := b.Record(i)
			start := floorDiv(r.Timestamp(), window) * window
			if w.open && start > w.start {
				w.flush(i, window, out)
			}
			if !w.open {
				w.open, w.start = true, start
			}
			w.counts[string(r.Key())]++
		}
		s.Set(w.encode())
		return nil
	}, nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// counter is the open window: its start and the count of each key. Its
// encoding is the transform's state:
//
//	start i64 | n u32 | (keyLen u32 | key | count u64) × n
type counter struct {
	open   bool
	start  int64
	counts map[string]uint64
	buf    []byte
}

var errBadState = errors.New("perminute: the state is not one this plugin wrote")

func (w *counter) decode(b []byte) error {
	if w.counts == nil {
		w.counts = map[string]uint64{}
	}
	clear(w.counts)
	w.open = len(b) > 0
	if !w.open {
		return nil
	}
	if len(b) < 12 {
		return errBadState
	}
	w.start = int64(binary.LittleEndian.Uint64(b))
	n := binary.LittleEndian.Uint32(b[8:])
	b = b[12:]
	for ; n > 0; n-- {
		if len(b) < 4 {
			return errBadState
		}
		kl := binary.LittleEndian.Uint32(b)
		if uint64(kl)+12 > uint64(len(b)) {
			return errBadState
		}
		w.counts[string(b[4:4+kl])] = binary.LittleEndian.Uint64(b[4+kl:])
		b = b[12+kl:]
	}
	if len(b) != 0 {
		return errBadState
	}
	return nil
}

func (w *counter) sortedKeys() []string {
	keys := make([]string, 0, len(w.counts))
	for k := range w.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (w *counter) encode() []byte {
	if !w.open {
		return nil
	}
	b := binary.LittleEndian.AppendUint64(w.buf[:0], uint64(w.start))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(w.counts)))
	for _, k := range w.sortedKeys() {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
		b = binary.LittleEndian.AppendUint64(b, w.counts[k])
	}
	w.buf = b
	return b
}

// flush outputs the open window's counts, from input record i, and
// closes it.
func (w *counter) flush(i int, window int64, out *plugin.Output) {
	for _, k := range w.sortedKeys() {
		v := strconv.AppendInt([]byte(`{"minute":`), w.start, 10)
		v = append(v, `,"key":`...)
		v = strconv.AppendQuote(v, k)
		v = append(v, `,"count":`...)
		v = strconv.AppendUint(v, w.counts[k], 10)
		v = append(v, '}')
		out.EmitAt(i, w.start+window-1, []byte(k), v)
	}
	clear(w.counts)
	w.open = false
}

func main() {}
