package transform

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/ledgemq/ledge/node/owner"

	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/record"
)

// maxStateBytes is the largest plugin state a transform keeps: one value
// of the group's state store.
const maxStateBytes = owner.MaxStateValueSize

// stepOutput is what a step's plugin call made of its input: the input
// it covers ([from, next)), the output batch (nil: no outputs) and the
// new state.
type stepOutput struct {
	next            uint64
	inputs, outputs int
	batch           []byte
	state           []byte
}

// transform calls the plugin on the input [from, next) of v with state.
// The output batch is built from the plugin's answer while the plugin
// still holds it (no copy of the answer in between). When the outputs
// do not fit one batch of the output topic, it calls it again on the
// first half of the input, and so on: a step's outputs are one batch,
// appended whole or not at all. A call the plugin did not get to answer
// within callWait through no fault of its own (starved) is made again,
// counted in neither failure count; the status says why while it lasts.
func (r *partRunner) transform(ctx context.Context, v *plugins.View, batches [][]byte, from, next uint64, state []byte) (stepOutput, error) {
	for {
		var out stepOutput
		var useErr error // the build's, not the plugin's
		cctx, cancel := context.WithTimeout(ctx, callWait)
		err := r.plugin.TransformFunc(cctx, r.spec.Plugin, r.params, v, state, func(res plugins.TransformResult) error {
			out = stepOutput{next: next, inputs: v.Len(), outputs: len(res.Outputs)}
			if len(res.State) > maxStateBytes {
				useErr = fmt.Errorf("transform: plugin %q answered a state of %d bytes, at most %d are kept", r.spec.Plugin, len(res.State), maxStateBytes)
				return useErr
			}
			out.state = bytes.Clone(res.State)
			if len(res.Outputs) > 0 {
				out.batch, useErr = r.build(v, res.Outputs)
			}
			return useErr
		})
		waitedOut := errors.Is(cctx.Err(), context.DeadlineExceeded)
		cancel()
		switch {
		case useErr == nil && err == nil:
			return out, nil
		case useErr == nil:
			if ctx.Err() != nil {
				return stepOutput{}, ctx.Err() // stopped, not a failure
			}
			if starved(err, waitedOut) {
				// The wait paced it: the same call again, at once.
				r.stats.starved(fmt.Errorf("transform: plugin %q: %w", r.spec.Plugin, err))
				continue
			}
			r.stats.pluginFailed()
			return stepOutput{}, pluginError{fmt.Errorf("transform: plugin %q: %w", r.spec.Plugin, err)}
		case useErr != errTooLarge:
			return stepOutput{}, useErr
		case v.Len() <= 1:
			return stepOutput{}, errTooLarge
		}
		// Half the input: a view ending before the middle record.
		half := v.Record(v.Len() / 2).Offset()
		nv, verr := plugins.NewView(plugins.PollResult{Topic: r.spec.From, Partition: int32(r.part), From: from,
			Next: half, Batches: batches})
		if verr != nil {
			return stepOutput{}, fmt.Errorf("transform: input: %w", verr)
		}
		defer nv.Release()
		v, next = nv, half
	}
}

// starved reports whether a call's error says that the plugin did not
// get to answer within the call's wait (callWait), through no fault of
// its own: no worker or instance of the plugin host came free
// (plugins.ErrBusy: every worker ran other calls), nor the memory to
// start one (plugins.ErrMemoryBudget, its wait over), or the wait ran out
// while the plugin ran, before the call's own deadline (the host says
// it abandoned the call). Neither counts against the plugin; a plugin
// that runs past its deadline fails with plugins.ErrTimeout instead.
func starved(err error, waitedOut bool) bool {
	return errors.Is(err, plugins.ErrBusy) || waitedOut && errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, plugins.ErrTimeout)
}

// build makes the output batch of a step: the producer's next sequence,
// every output in order, each with its input's headers when it takes them.
func (r *partRunner) build(v *plugins.View, outs []plugins.Output) ([]byte, error) {
	// The batch is built in place, in a buffer sized for the outputs
	// (the last batch's memory when the output gave it back): the
	// records are copied once, from the plugin's answer (its memory) and
	// the input into it.
	size := record.BatchHeaderSize
	for i := range outs {
		o := &outs[i]
		size += len(o.Key) + o.ValueLen() + 24
		for _, h := range o.Headers {
			size += len(h.Key) + len(h.Value) + 8
		}
		if o.InputHeaders {
			in := v.Record(o.Input)
			for j := range in.HeaderCount() {
				k, hv := in.Header(j)
				size += len(k) + len(hv) + 8
			}
		}
	}
	b := &r.bb
	b.ResetInPlace(r.batchBuffer(min(size, r.maxBatch) + 64))
	b.SetProducer(uint64(r.id.ID), uint32(r.id.Epoch), r.seq)
	hs := r.hdrs[:0]
	for i := range outs {
		o := &outs[i]
		hs = hs[:0]
		if o.InputHeaders {
			in := v.Record(o.Input)
			for j := range in.HeaderCount() {
				k, hv := in.Header(j)
				hs = append(hs, record.Header{Key: string(k), Value: hv})
			}
		} else {
			for _, h := range o.Headers {
				hs = append(hs, record.Header{Key: string(h.Key), Value: h.Value})
			}
		}
		rec := record.Record{Timestamp: o.Timestamp, Key: o.Key, Value: o.Value, Headers: hs}
		if o.ValueParts != nil {
			b.AppendParts(rec, o.ValueParts)
		} else {
			b.Append(rec)
		}
		if b.Size() > r.maxBatch {
			clear(hs)
			r.hdrs = hs[:0]
			return nil, errTooLarge
		}
	}
	clear(hs)
	r.hdrs = hs[:0]
	batch, err := b.FinishInPlace(record.CompressionNone)
	if err != nil {
		return nil, fmt.Errorf("transform: output batch: %w", err)
	}
	return batch, nil
}
