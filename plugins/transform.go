package plugins

import (
	"context"
	"fmt"
	"math"

	"github.com/ledgemq/ledge/plugins/abi"
)

// Output is one output record of a transform: the index of the input
// record it comes from (outputs come in input order), its timestamp, key,
// value and headers.
type Output = abi.Output

// OutHeader is a header of an Output; a nil Value is null.
type OutHeader = abi.OutHeader

// TransformResult is what a transform answered for one batch.
type TransformResult struct {
	// Outputs are the output records, in the order of the inputs they
	// come from: zero or more per input.
	Outputs []Output
	// State is the state to hand to the next call on the same stream
	// (nil: empty). The caller stores it with the outputs.
	State []byte
}

// Transform runs transform plugin name, initialized with params, over v
// with the state the previous call answered (nil on the first batch), and
// returns the output records and the new state. The call is a function of
// its inputs: the batch, the state and the parameters; a transform keeps
// nothing between calls but the state it returns, since any instance may
// serve the next batch. The answer is validated (layout, every count and
// length against the bytes that carry it, input indices in range and in
// order, the state within Config.MaxStateBytes, the whole answer within
// Config.MaxOutputBytes). The result does not alias the plugin's memory;
// a key or value the plugin took from its input aliases v, so use the
// outputs before releasing v, and an output with InputHeaders set has the
// headers of v.Record(Input) (View.OutputHeaders reads them). An empty
// view is answered without calling the plugin: no outputs, the state
// unchanged.
//
// Errors are those of Filter; a state larger than Config.MaxStateBytes is
// ErrInputTooLarge. The batch is not consumed: the caller keeps its
// position and its state.
func (h *Host) Transform(ctx context.Context, name string, params Params, v *View, state []byte) (TransformResult, error) {
	if len(state) > h.cfg.MaxStateBytes {
		return TransformResult{}, fmt.Errorf("%w: a state of %d bytes, the limit is %d", ErrInputTooLarge, len(state), h.cfg.MaxStateBytes)
	}
	var res TransformResult
	err := h.call(ctx, name, KindTransform, params, v, state, func(ans []byte) (int, error) {
		a, err := abi.ParseTransformAnswer(ans, &v.abi, h.cfg.MaxStateBytes)
		if err != nil {
			return 0, fmt.Errorf("%w: %q: %s: %w", ErrInvalidAnswer, name, abi.ExportTransform, err)
		}
		res = TransformResult{Outputs: a.Outputs, State: a.State}
		return len(a.Outputs), nil
	})
	if err != nil {
		return TransformResult{}, err
	}
	if v.Len() == 0 {
		return TransformResult{State: state}, nil
	}
	return res, nil
}

// OutputHeaders returns the headers of o, an output of a transform over v:
// its own, or those of its input record.
func (v *View) OutputHeaders(o Output) []OutHeader {
	if !o.InputHeaders {
		return o.Headers
	}
	r := v.Record(o.Input)
	hs := make([]OutHeader, r.HeaderCount())
	for j := range hs {
		hs[j].Key, hs[j].Value = r.Header(j)
	}
	return hs
}

// runTransform copies v and state into the guest, calls its transform and
// returns the answer it pointed to, copied out of its memory.
func (in *instance) runTransform(ctx context.Context, t *turn, v *View, state []byte) ([]byte, error) {
	const name = abi.ExportTransform
	if err := in.begin(ctx, t, in.h.cfg.CallTimeout, v); err != nil {
		return nil, err
	}
	defer in.end()
	stateOff := (len(v.region) + 7) &^ 7
	if err := in.ensureBuffer(stateOff + len(state)); err != nil {
		return nil, err
	}
	if !in.mem.Write(in.bufPtr, v.region) || !in.mem.Write(in.bufPtr+uint32(stateOff), state) {
		return nil, in.bufferLost()
	}
	r, err := in.callRaw(in.transform, uint64(in.bufPtr), uint64(len(v.region)),
		uint64(in.bufPtr)+uint64(stateOff), uint64(len(state)))
	if err != nil {
		return nil, in.classify(err, name)
	}
	res := int64(r)
	if res < 0 {
		if res < math.MinInt32 {
			return nil, fmt.Errorf("%w: %q: %s returned %d, not an error code (a negative int32)", ErrInvalidAnswer, in.p.name, name, res)
		}
		return nil, in.guestError(name, int32(res))
	}
	ptr, n, _ := abi.UnpackAnswer(res)
	if int64(n) > int64(in.h.cfg.MaxOutputBytes) {
		return nil, fmt.Errorf("%w: %q: %s answered %d bytes, the limit is %d", ErrInvalidAnswer, in.p.name, name, n, in.h.cfg.MaxOutputBytes)
	}
	ans, ok := in.mem.Read(ptr, n)
	if !ok {
		return nil, fmt.Errorf("%w: %q: %s answered [%d, %d), outside the plugin's memory of %d bytes",
			ErrInvalidAnswer, in.p.name, name, ptr, uint64(ptr)+uint64(n), in.mem.Size())
	}
	return append([]byte(nil), ans...), nil
}
