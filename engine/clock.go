package engine

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/ledgemq/ledge/engine/internal/codec"
)

// jumpFreeClock turns the wall clock into one that never jumps: each
// observation adds the step since the previous one if it is forward and
// at most maxStep; a backward step or a larger forward step (a device
// booting in 1970, then corrected by NTP; a clock set far ahead by
// mistake) adds nothing. Retention and segment age are measured with it,
// so a clock jump never makes data look old; at worst data is kept longer.
// It is persisted (NoSync, with other metadata) so it also survives
// restarts; downtime longer than maxStep is not counted.
type jumpFreeClock struct {
	mu        sync.Mutex
	wall      func() time.Time
	maxStep   int64
	lastWall  int64 // ms
	eff       int64 // ms
	persisted int64 // eff when last written
}

// persistClock writes the jump-free clock (without an fsync) when it has
// advanced by at least 10 s since it was last written.
func (e *Engine) persistClock(eff int64) {
	c := e.clock
	c.mu.Lock()
	due := eff-c.persisted >= 10_000
	if due {
		c.persisted = eff
	}
	c.mu.Unlock()
	if !due {
		return
	}
	b := e.db.NewBatch()
	defer b.Close()
	_ = b.Set([]byte{'K'}, seal(kindClock, c.encode()), nil)
	_ = e.commit(b, false)
}

// observe feeds a wall-clock reading and returns the jump-free time (ms).
func (c *jumpFreeClock) observe(wall time.Time) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	ms := wall.UnixMilli()
	if step := ms - c.lastWall; step > 0 && step <= c.maxStep {
		c.eff += step
	}
	c.lastWall = ms
	return c.eff
}

// now observes the injected wall clock.
func (c *jumpFreeClock) now() int64 { return c.observe(c.wall()) }

func (c *jumpFreeClock) encode() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := binary.AppendVarint(nil, c.lastWall)
	return binary.AppendVarint(b, c.eff)
}

func (c *jumpFreeClock) decode(p []byte) error {
	r := codec.NewReader(p)
	wall, eff := r.Varint(), r.Varint()
	if err := r.Done(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastWall, c.eff = wall, eff
	return nil
}
