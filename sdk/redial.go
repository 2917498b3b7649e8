package sdk

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ledgemq/ledge/transport/quic"
)

// A node that refuses a connection for now (at its connection limit,
// behind with its handshakes, evicting the connection to make room,
// shutting down), or takes longer than the dial timeout to set one up,
// is dialed again only after a pause, and the pauses of a client grow
// while it keeps being refused: the first is 100–200 ms, each next one
// doubles, up to 2.5–5 s. Each is drawn at random between half and all
// of its length, so that a fleet refused together does not come back
// together. Within a dial's timeout the client tries again by itself;
// past it, the next dial (the next request's) waits out what is left of
// the pause. A connection set up ends the pauses.
const (
	redialFirst = 200 * time.Millisecond
	redialMax   = 5 * time.Second
)

// redial is a client's pauses between refused dials.
type redial struct {
	mu      sync.Mutex
	refused int       // in a row
	until   time.Time // no dial before it
	jitter  func() float64
}

// pause returns how long a dial at now must wait.
func (r *redial) pause(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.until.Sub(now), 0)
}

// refuse notes a dial refused (or timed out) at now and returns the
// pause before the next one.
func (r *redial) refuse(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	full := min(redialFirst<<min(r.refused, 16), redialMax)
	r.refused++
	j := rand.Float64
	if r.jitter != nil {
		j = r.jitter
	}
	d := full/2 + time.Duration(j()*float64(full/2))
	r.until = now.Add(d)
	return d
}

// connected ends the pauses.
func (r *redial) connected() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused, r.until = 0, time.Time{}
}

// refusedForNow reports whether a dial's error says the node answered
// and will take the connection later: try again after a pause.
func refusedForNow(err error) bool {
	return errors.Is(err, quic.ErrConnectionRefused) || errors.Is(err, quic.ErrServerClosed) ||
		errors.Is(err, quic.ErrAuthTimeout)
}

// sleepCtx waits d, or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
