package plugins

import (
	"context"
	"fmt"
)

// Guest code runs on at most MaxConcurrentCalls workers at once: a
// metered guest gives its thread back only to the Go scheduler, never to
// the kernel, so without a bound enough busy plugins would hold every
// core and polls and produces without plugins would queue behind them.
// A worker is a token, not a goroutine: the caller's goroutine runs the
// guest once it holds one, so no hand-off is added to a call.

// takeWorker waits for a worker, until ctx ends or the host closes.
func (h *Host) takeWorker(ctx context.Context, name string) error {
	select {
	case h.workers <- struct{}{}:
		return nil
	default:
	}
	select {
	case h.workers <- struct{}{}:
		return nil
	case <-h.lifetime.Done():
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("plugins: %q: waiting for one of the %d plugin workers: %w", name, cap(h.workers), context.Cause(ctx))
	}
}

// putWorker gives back what takeWorker took.
func (h *Host) putWorker() { <-h.workers }
