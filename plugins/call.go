package plugins

import (
	"context"
	"errors"
	"fmt"

	"github.com/ledgemq/ledge/plugins/abi"
)

// Filter runs filter plugin name, initialized with params, over v and
// returns which records to keep. The answer is validated (size, no stray
// bits). An empty view is answered without calling the plugin.
//
// Errors: ErrUnknownPlugin, ErrWrongKind, ErrQuarantined, ErrBadParams,
// ErrInputTooLarge, ErrMemoryBudget, ErrBusy (the context ended while the
// call waited for a worker or an instance), the context's error (it ended
// while the plugin ran, before the call's own deadline: the call was
// abandoned, and that is not held against the plugin), and from the
// plugin ErrTimeout, ErrTrap, ErrInvalidAnswer and ErrPluginFailed. The
// poll fails; the consumer's position is unchanged.
func (h *Host) Filter(ctx context.Context, name string, params Params, v *View) (Bitmap, error) {
	var keep Bitmap
	err := h.call(ctx, name, KindFilter, params, v, nil, func(ans, _ []byte) (int, error) {
		var err error
		keep, err = abi.ParseBitmap(ans, v.Len())
		if err != nil {
			return 0, fmt.Errorf("%w: %q: %s: %w", ErrInvalidAnswer, name, abi.ExportFilter, err)
		}
		return keep.Count(), nil
	})
	if err != nil {
		return Bitmap{}, err
	}
	if v.Len() == 0 {
		return abi.NewBitmap(0), nil
	}
	return keep, nil
}

// Propose runs commit policy name, initialized with params, over v and
// returns its proposal. A proposal to commit must name an offset within
// the delivered range [v.From(), v.Next()); anything else is an invalid
// answer. An empty view is answered (no proposal) without calling the
// plugin. Errors are those of Filter.
func (h *Host) Propose(ctx context.Context, name string, params Params, v *View) (Proposal, error) {
	var prop Proposal
	err := h.call(ctx, name, KindCommitPolicy, params, v, nil, func(ans, _ []byte) (int, error) {
		var err error
		prop, err = abi.ParseProposal(ans)
		if err != nil {
			return 0, fmt.Errorf("%w: %q: %s: %w", ErrInvalidAnswer, name, abi.ExportPropose, err)
		}
		if prop.Commit && (prop.Through < v.From() || prop.Through >= v.Next()) {
			return 0, fmt.Errorf("%w: %q: %s proposes to commit through offset %d, outside the delivered range [%d, %d)",
				ErrInvalidAnswer, name, abi.ExportPropose, prop.Through, v.From(), v.Next())
		}
		return 0, nil
	})
	return prop, err
}

// lookup finds a usable plugin of the given kind.
func (h *Host) lookup(name string, kind Kind) (*plugin, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	p := h.plugins[name]
	if p == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownPlugin, name)
	}
	if p.kind != kind {
		return nil, fmt.Errorf("%w: %q is a %v, not a %v", ErrWrongKind, name, p.kind, kind)
	}
	return p, h.usableLocked(p)
}

// call is the body of Filter, Propose and Transform: take an instance, run
// the call (a transform's with its previous state), validate the answer
// with check, which returns the records the call let out, and release or
// discard the instance. A filter's or a policy's answer is a copy; a
// transform's is read in the instance's memory (mem, the whole of it),
// which check may read until it returns: the instance is still held, and
// the host does not close it meanwhile.
func (h *Host) call(ctx context.Context, name string, kind Kind, params Params, v *View, state []byte, check func(ans, mem []byte) (int, error)) error {
	p, err := h.lookup(name, kind)
	if err != nil {
		return err
	}
	enc, err := params.encode()
	if err != nil {
		return err
	}
	if v.Len() == 0 {
		return nil
	}
	if v.Size() > h.cfg.MaxInputBytes {
		return fmt.Errorf("%w: %d records in %d bytes, the limit is %d bytes; poll fewer bytes",
			ErrInputTooLarge, v.Len(), v.Size(), h.cfg.MaxInputBytes)
	}
	var t turn
	in, err := h.acquire(ctx, &t, p, kind, enc)
	if err != nil {
		h.pool.end(&t, p)
		return err
	}
	start := h.cfg.Now()
	var ans, mem []byte
	switch kind {
	case KindFilter:
		ans, err = in.run(ctx, &t, in.filter, abi.ExportFilter, v)
	case KindCommitPolicy:
		ans, err = in.run(ctx, &t, in.propose, abi.ExportPropose, v)
	default:
		ans, mem, err = in.runTransform(ctx, &t, v, state)
	}
	h.pool.end(&t, p)
	if errors.Is(err, ErrBusy) {
		// The call never got a worker: no plugin code ran, and the
		// instance is as it was.
		h.release(in, false)
		return err
	}
	elapsed := h.cfg.Now().Sub(start) // the plugin's, not check's
	out := 0
	switch {
	case err != nil:
	case mem == nil:
		out, err = check(ans, nil)
	default:
		// Close waits for what entered before it closes instances.
		if err = h.enter(); err == nil {
			out, err = check(ans, mem)
			h.leave()
		}
	}
	p.judge(in.cs.yields >= slowYields || errors.Is(err, ErrTimeout))
	if err != nil {
		// A plugin's own error report leaves the instance sound; anything
		// else may have left it mid-way, so it is discarded.
		h.release(in, !isGuestError(err))
		h.strike(p, err)
		p.stats.failure(err)
		return err
	}
	h.release(in, false)
	p.stats.call(v.Len(), out, elapsed)
	return nil
}

// probe starts the first instance of a plugin being added, proving that
// it starts and speaks the ABI, and keeps it idle for the first call.
func (h *Host) probe(ctx context.Context, p *plugin) error {
	var t turn
	in, err := h.acquire(ctx, &t, p, p.kind, nil)
	h.pool.end(&t, p)
	if err != nil {
		return err
	}
	h.release(in, false)
	return nil
}
