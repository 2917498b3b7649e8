package plugins

import (
	"context"
	"fmt"
	"math"
	"sync"

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
// order, value spans within the plugin's memory, the state within
// Config.MaxStateBytes, the whole answer with the bytes its spans name
// within Config.MaxOutputBytes). The result does not alias the plugin's
// memory: it is copied out, values in parts joined (ValueParts is nil);
// a key or value the plugin took from its input aliases v, so use the
// outputs before releasing v, and an output with InputHeaders set has
// the headers of v.Record(Input) (View.OutputHeaders reads them). An empty view is
// answered without calling the plugin: no outputs, the state unchanged.
// TransformFunc does the same without the copy.
//
// Errors are those of Filter; a state larger than Config.MaxStateBytes is
// ErrInputTooLarge. The batch is not consumed: the caller keeps its
// position and its state.
func (h *Host) Transform(ctx context.Context, name string, params Params, v *View, state []byte) (TransformResult, error) {
	var res TransformResult
	err := h.TransformFunc(ctx, name, params, v, state, func(r TransformResult) error {
		res = cloneResult(v, r)
		return nil
	})
	if err != nil {
		return TransformResult{}, err
	}
	return res, nil
}

// TransformFunc is Transform handing the validated answer to use while
// the plugin's instance is still held, without copying it: the result
// aliases the plugin's memory and v, and is valid only until use returns
// (copy the state, and whatever else must outlive it). A caller builds
// its output batch straight from the plugin's memory this way. An error
// of use is returned as it is, and is not held against the plugin. use
// is not called when the call fails; an empty view calls it with no
// outputs and state.
func (h *Host) TransformFunc(ctx context.Context, name string, params Params, v *View, state []byte, use func(TransformResult) error) error {
	if len(state) > h.cfg.MaxStateBytes {
		return fmt.Errorf("%w: a state of %d bytes, the limit is %d", ErrInputTooLarge, len(state), h.cfg.MaxStateBytes)
	}
	a := answerPool.Get().(*abi.TransformAnswer)
	defer putAnswer(a)
	called := false
	var useErr error
	err := h.call(ctx, name, KindTransform, params, v, state, func(ans, mem []byte) (int, error) {
		if err := abi.ParseTransformAnswerInto(a, ans, &v.abi, mem, h.cfg.MaxStateBytes, h.cfg.MaxOutputBytes); err != nil {
			return 0, fmt.Errorf("%w: %q: %s: %w", ErrInvalidAnswer, name, abi.ExportTransform, err)
		}
		called = true
		useErr = use(TransformResult{Outputs: a.Outputs, State: a.State})
		return len(a.Outputs), nil
	})
	switch {
	case err != nil:
		return err
	case !called:
		return use(TransformResult{State: state}) // an empty view
	}
	return useErr
}

// answerPool holds parsed answers' room (their outputs, headers and
// value parts), reused from call to call; maxPooledAnswer bounds what
// one keeps.
var answerPool = sync.Pool{New: func() any { return new(abi.TransformAnswer) }}

const maxPooledAnswer = 1 << 16

func putAnswer(a *abi.TransformAnswer) {
	a.Reset()
	if a.Room() <= maxPooledAnswer {
		answerPool.Put(a)
	}
}

// cloneResult copies r, a result over v, into memory of its own: keys,
// values (parts joined), headers and state in one buffer. A key or value
// taken from the input keeps aliasing v.
func cloneResult(v *View, r TransformResult) TransformResult {
	n, nh := len(r.State), 0
	for i := range r.Outputs {
		o := &r.Outputs[i]
		in := v.Record(o.Input)
		if !same(o.Key, in.Key()) {
			n += len(o.Key)
		}
		if !same(o.Value, in.Value()) {
			n += o.ValueLen()
		}
		nh += len(o.Headers)
		for _, h := range o.Headers {
			n += len(h.Key) + len(h.Value)
		}
	}
	buf := make([]byte, 0, n)
	keep := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		at := len(buf)
		buf = append(buf, b...)
		return buf[at:len(buf):len(buf)]
	}
	outs := make([]Output, len(r.Outputs))
	var hdrs []OutHeader
	if nh > 0 {
		hdrs = make([]OutHeader, 0, nh)
	}
	for i, o := range r.Outputs {
		c := o
		in := v.Record(o.Input)
		if !same(o.Key, in.Key()) {
			c.Key = keep(o.Key)
		}
		switch {
		case same(o.Value, in.Value()):
			// taken from the input: it keeps aliasing v
		case o.ValueParts != nil:
			at := len(buf)
			for _, p := range o.ValueParts {
				buf = append(buf, p...)
			}
			c.Value, c.ValueParts = buf[at:len(buf):len(buf)], nil
		default:
			c.Value = keep(o.Value)
		}
		if o.Headers != nil {
			at := len(hdrs)
			for _, h := range o.Headers {
				hdrs = append(hdrs, OutHeader{Key: keep(h.Key), Value: keep(h.Value)})
			}
			c.Headers = hdrs[at:len(hdrs):len(hdrs)]
		}
		outs[i] = c
	}
	return TransformResult{Outputs: outs, State: keep(r.State)}
}

// same reports whether a and b are the same bytes in memory: an output's
// key or value taken from its input is the input's own slice.
func same(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
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
// returns the answer it pointed to and the guest's whole memory, both
// aliasing that memory: the caller reads them before the instance is
// used again or closed.
func (in *instance) runTransform(ctx context.Context, t *turn, v *View, state []byte) (ans, mem []byte, err error) {
	const name = abi.ExportTransform
	if err := in.begin(ctx, t, in.h.cfg.CallTimeout, v); err != nil {
		return nil, nil, err
	}
	defer in.end()
	stateOff := (len(v.region) + 7) &^ 7
	if err := in.ensureBuffer(stateOff + len(state)); err != nil {
		return nil, nil, err
	}
	if !in.mem.Write(in.bufPtr, v.region) || !in.mem.Write(in.bufPtr+uint32(stateOff), state) {
		return nil, nil, in.bufferLost()
	}
	r, err := in.callRaw(in.transform, uint64(in.bufPtr), uint64(len(v.region)),
		uint64(in.bufPtr)+uint64(stateOff), uint64(len(state)))
	if err != nil {
		return nil, nil, in.classify(err, name)
	}
	res := int64(r)
	if res < 0 {
		if res < math.MinInt32 {
			return nil, nil, fmt.Errorf("%w: %q: %s returned %d, not an error code (a negative int32)", ErrInvalidAnswer, in.p.name, name, res)
		}
		return nil, nil, in.guestError(name, int32(res))
	}
	ptr, n, _ := abi.UnpackAnswer(res)
	if int64(n) > int64(in.h.cfg.MaxOutputBytes) {
		return nil, nil, fmt.Errorf("%w: %q: %s answered %d bytes, the limit is %d", ErrInvalidAnswer, in.p.name, name, n, in.h.cfg.MaxOutputBytes)
	}
	ans, ok := in.mem.Read(ptr, n)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q: %s answered [%d, %d), outside the plugin's memory of %d bytes",
			ErrInvalidAnswer, in.p.name, name, ptr, uint64(ptr)+uint64(n), in.mem.Size())
	}
	mem, _ = in.mem.Read(0, in.mem.Size())
	return ans, mem, nil
}
