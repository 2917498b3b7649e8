package sdk

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// busyPolls is what a consumer keeps of the node's busy answers to its
// polls: how many, and when it may poll again.
type busyPolls struct {
	count     atomic.Uint64
	notBefore time.Time // under the consumer's pollMu
}

// defaultBusyPollWait is the wait after a busy poll without a retry-after
// (an older node's, or a long poll past the node's parked polls, which is
// answered at once), when the poll asked to wait less.
const defaultBusyPollWait = time.Second

// note records a poll's error: after a busy answer, the next poll waits
// the node's retry-after (else the poll's own wait, at most a second),
// plus up to as much again of jitter, so that consumers the node turned
// away together do not come back together.
func (b *busyPolls) note(err error, maxWait time.Duration) {
	var we *wire.Error
	if !errors.As(err, &we) || we.Status != wire.StatusBusy {
		return
	}
	b.count.Add(1)
	wait := we.RetryAfter
	if wait <= 0 {
		wait = min(max(maxWait, 10*time.Millisecond), defaultBusyPollWait)
	}
	b.notBefore = time.Now().Add(wait + rand.N(wait+1))
}

// wait holds the next poll until the node's retry-after has passed.
func (b *busyPolls) wait(ctx context.Context) error {
	d := time.Until(b.notBefore)
	if d <= 0 || sleepCtx(ctx, d) {
		return nil
	}
	return context.Cause(ctx)
}

// ConsumerStats counts what a consumer met.
type ConsumerStats struct {
	// Busy is the polls the node answered busy (it served nothing; the
	// next poll waited its retry-after; docs/OPERATIONS.md, "Overload").
	Busy uint64
}

// Stats returns what c has met so far.
func (c *Consumer) Stats() ConsumerStats { return ConsumerStats{Busy: c.busy.count.Load()} }
