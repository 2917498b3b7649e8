package abi

import (
	"fmt"
	"math"
)

// A transform is called with an input region (the filter's layout) and the
// state it answered with on the previous batch:
//
//	ledge_transform(ptr i32, len i32, state i32, stateLen i32) -> i64
//
// The host writes the region at [ptr, ptr+len) and the previous state at
// [state, state+stateLen) (stateLen 0 on the first batch), both inside the
// buffer it was lent. The guest writes its answer anywhere in its memory
// and returns its address and size packed as answerPtr<<32 | answerLen (so
// the answer starts below 2 GiB); a negative result is an error, as for
// the other kinds.
//
// Transform answer layout (TransformAnswerSize header, then the outputs,
// then the new state; every integer little-endian):
//
//	off size field
//	 0   4   magic       TransformMagic ("LTA1")
//	 4   4   count       output records
//	 8   4   stateLen    bytes of the new state, at the end of the answer
//	12   4   reserved    0
//
// Output record (OutputEntrySize bytes, then its bytes):
//
//	 0   4   input       index of the input record it comes from; the
//	                     indices of successive outputs never decrease
//	 4   4   headerCount InputHeaders (0xFFFFFFFF) = the input's headers
//	 8   8   timestamp   unix milliseconds
//	16   4   keyLen      int32; -1 = null key; FromInput (-2) = the
//	                     input's key, not repeated in the answer
//	20   4   valueLen    int32; -1 = null value; FromInput = the input's;
//	                     ValueSpans (-3) = spans of the guest's memory
//	24       key, value, then headerCount headers, each
//	         keyLen u32 | valueLen i32 (-1 = null) | key | value
//
// A value of ValueSpans is, where its bytes would be, spanCount u32
// then spanCount spans, each ptr u32 | len u32: the value is the
// concatenation of those spans of the guest's linear memory, which the
// host reads once the call has returned (the guest leaves them unchanged
// until then). Every span lies within the memory, and the answer with
// the bytes its spans name is within the host's output limit.
//
// A part taken from the input (FromInput, InputHeaders) costs the guest
// no copy: a pass-through answers 24 bytes per record. A value in spans
// costs it no copy either: a value changed in place in the input, or an
// envelope of constant bytes around the input's value, is 8 bytes a
// span.
//
// The outputs end exactly where the state begins, and the state exactly
// where the answer ends.
const (
	TransformMagic      uint32 = 'L' | 'T'<<8 | 'A'<<16 | '1'<<24
	TransformAnswerSize        = 16
	OutputEntrySize            = 24
	outputHeaderSize           = 8
	spanSize                   = 8
)

// Sources of an output record's parts: keyLen or valueLen FromInput is
// the input record's key or value, headerCount InputHeaders its headers.
const (
	FromInput    = -2
	ValueSpans   = -3
	InputHeaders = math.MaxUint32
)

// Span is a span of the guest's linear memory: Len bytes at Ptr.
type Span struct{ Ptr, Len uint32 }

// Take says which parts of an output record are the input record's
// (OutputEncoder.AddInput).
type Take uint8

// Parts an output can take from its input.
const (
	TakeKey Take = 1 << iota
	TakeValue
	TakeHeaders
)

// ExportTransform is the transform call: (ptr i32, len i32, state i32,
// stateLen i32) -> i64, described above.
const ExportTransform = "ledge_transform"

// KindTransform is the call kind of a transform, passed to ExportInit and
// a bit of ExportKinds.
const KindTransform = 4

// PackAnswer packs an answer's address and size as ExportTransform
// returns them.
func PackAnswer(ptr, n uint32) int64 { return int64(uint64(ptr)<<32 | uint64(n)) }

// UnpackAnswer splits the result of ExportTransform: the answer's address
// and size, or ok false for an error result (negative).
func UnpackAnswer(r int64) (ptr, n uint32, ok bool) {
	if r < 0 {
		return 0, 0, false
	}
	return uint32(uint64(r) >> 32), uint32(r), true
}

// OutHeader is a header of an output record. A nil Value is null.
type OutHeader struct {
	Key   []byte
	Value []byte
}

// Output is one output record of a transform.
type Output struct {
	// Input is the index in the input batch of the record it comes from.
	Input     int
	Timestamp int64
	Key       []byte // nil: null
	Value     []byte // nil: null
	Headers   []OutHeader
	// InputHeaders: the record's headers are those of input record
	// Input (Headers is nil); read them from the input.
	InputHeaders bool
	// ValueParts, when not nil, is the value in parts to concatenate
	// (never null; Value is nil): the spans of the guest's memory of a
	// ValueSpans value.
	ValueParts [][]byte
}

// ValueLen returns the length of o's value (0 when null).
func (o *Output) ValueLen() int {
	if o.ValueParts == nil {
		return len(o.Value)
	}
	n := 0
	for _, p := range o.ValueParts {
		n += len(p)
	}
	return n
}

// TransformAnswer is a parsed transform answer. Its byte slices alias the
// bytes it was parsed from, the input and the guest's memory.
type TransformAnswer struct {
	Outputs []Output
	State   []byte
	hdrs    []OutHeader
	parts   [][]byte
}

// Reset empties a, keeping its room for the next ParseTransformAnswerInto
// and letting go of what it referred to.
func (a *TransformAnswer) Reset() {
	clear(a.Outputs)
	clear(a.hdrs)
	clear(a.parts)
	*a = TransformAnswer{Outputs: a.Outputs[:0], hdrs: a.hdrs[:0], parts: a.parts[:0]}
}

// Room returns how many outputs, headers and value parts a holds room
// for (a pool of answers lets go of one that grew too large).
func (a *TransformAnswer) Room() int { return cap(a.Outputs) + cap(a.hdrs) + cap(a.parts) }

// OutputEncoder writes a transform answer. The zero value is ready; Reset
// makes it reusable without reallocating.
type OutputEncoder struct {
	b     []byte
	count int
	last  int
}

// Reset empties the encoder.
func (e *OutputEncoder) Reset() {
	e.b = append(e.b[:0], make([]byte, TransformAnswerSize)...)
	e.count, e.last = 0, 0
}

// Len returns the number of outputs added.
func (e *OutputEncoder) Len() int { return e.count }

// Add appends an output record coming from input record input. Inputs
// must not decrease from one output to the next: Add panics otherwise.
func (e *OutputEncoder) Add(input int, timestamp int64, key, value []byte, headers ...OutHeader) {
	e.AddInput(input, timestamp, 0, key, value, headers...)
}

// AddInput appends an output record coming from input record input that
// takes the parts take names from it (the arguments for those parts are
// ignored) and the others from the arguments. See Add.
func (e *OutputEncoder) AddInput(input int, timestamp int64, take Take, key, value []byte, headers ...OutHeader) {
	e.add(input, timestamp, take, key, value, nil, false, headers)
}

// AddSpans appends an output record coming from input record input whose
// value is the concatenation of spans of the guest's memory (ValueSpans),
// which the host reads when the call returns; take may name the key and
// the headers (TakeValue is ignored). See Add.
func (e *OutputEncoder) AddSpans(input int, timestamp int64, take Take, key []byte, spans []Span, headers ...OutHeader) {
	e.add(input, timestamp, take&^TakeValue, key, nil, spans, true, headers)
}

func (e *OutputEncoder) add(input int, timestamp int64, take Take, key, value []byte, spans []Span, spanned bool, headers []OutHeader) {
	if len(e.b) < TransformAnswerSize {
		e.Reset()
	}
	if input < e.last || input < 0 || input > math.MaxInt32 {
		panic(fmt.Sprintf("abi: output from input %d after one from input %d", input, e.last))
	}
	e.last = input
	kl, vl, hc := nullableLen(key), nullableLen(value), uint32(len(headers))
	if take&TakeKey != 0 {
		kl, key = uint32(FromInput&math.MaxUint32), nil
	}
	if take&TakeValue != 0 {
		vl, value = uint32(FromInput&math.MaxUint32), nil
	}
	if take&TakeHeaders != 0 {
		hc, headers = InputHeaders, nil
	}
	if spanned {
		vl, value = uint32(ValueSpans&math.MaxUint32), nil
	}
	e.b = le.AppendUint32(e.b, uint32(input))
	e.b = le.AppendUint32(e.b, hc)
	e.b = le.AppendUint64(e.b, uint64(timestamp))
	e.b = le.AppendUint32(e.b, kl)
	e.b = le.AppendUint32(e.b, vl)
	e.b = append(e.b, key...)
	e.b = append(e.b, value...)
	if spanned {
		e.b = le.AppendUint32(e.b, uint32(len(spans)))
		for _, sp := range spans {
			e.b = le.AppendUint32(e.b, sp.Ptr)
			e.b = le.AppendUint32(e.b, sp.Len)
		}
	}
	for _, h := range headers {
		e.b = le.AppendUint32(e.b, uint32(len(h.Key)))
		e.b = le.AppendUint32(e.b, nullableLen(h.Value))
		e.b = append(e.b, h.Key...)
		e.b = append(e.b, h.Value...)
	}
	e.count++
}

func nullableLen(b []byte) uint32 {
	if b == nil {
		return math.MaxUint32
	}
	return uint32(len(b))
}

// Finish appends state and completes the answer, returning its bytes
// (valid until the next Reset or Add).
func (e *OutputEncoder) Finish(state []byte) []byte {
	if len(e.b) < TransformAnswerSize {
		e.Reset()
	}
	e.b = append(e.b, state...)
	le.PutUint32(e.b[0:], TransformMagic)
	le.PutUint32(e.b[4:], uint32(e.count))
	le.PutUint32(e.b[8:], uint32(len(state)))
	le.PutUint32(e.b[12:], 0)
	return e.b
}

// ParseTransformAnswer checks a transform answer for the batch in, its new
// state at most maxState bytes, and returns it, aliasing b and, for the
// parts taken from the input, in's region. Every count and length is
// checked against the bytes that carry it before anything is allocated
// for it: a hostile answer costs at most a slice proportional to its own
// size (headers taken from the input are not copied: see
// Output.InputHeaders). An answer with a value in spans (ValueSpans) is
// refused: only ParseTransformAnswerInto, given the guest's memory, reads
// one.
func ParseTransformAnswer(b []byte, in *View, maxState int) (TransformAnswer, error) {
	var a TransformAnswer
	if err := ParseTransformAnswerInto(&a, b, in, nil, maxState, 0); err != nil {
		return TransformAnswer{}, err
	}
	return a, nil
}

// ParseTransformAnswerInto is ParseTransformAnswer into a, reusing its
// room (see Reset), with the values in spans (ValueSpans) read from mem,
// the guest's whole linear memory: every span must lie within it, and
// the answer with the bytes its spans name must be at most maxBytes. The
// result also aliases mem. On an error a holds no valid answer.
func ParseTransformAnswerInto(a *TransformAnswer, b []byte, in *View, mem []byte, maxState, maxBytes int) error {
	a.Reset()
	inputs := in.Len()
	outs, hdrs, parts := a.Outputs, a.hdrs, a.parts
	bad := func(format string, args ...any) error {
		clear(outs)
		clear(hdrs)
		clear(parts)
		*a = TransformAnswer{Outputs: outs[:0], hdrs: hdrs[:0], parts: parts[:0]}
		return fmt.Errorf("%w: "+format, append([]any{ErrBadAnswer}, args...)...)
	}
	if len(b) < TransformAnswerSize {
		return bad("transform answer of %d bytes, the header alone is %d", len(b), TransformAnswerSize)
	}
	magic, count, stateLen, res := le.Uint32(b), le.Uint32(b[4:]), le.Uint32(b[8:]), le.Uint32(b[12:])
	switch {
	case magic != TransformMagic:
		return bad("transform answer magic %#08x, want %#08x", magic, TransformMagic)
	case res != 0:
		return bad("transform answer reserved field is %#x", res)
	case uint64(stateLen) > uint64(len(b)-TransformAnswerSize):
		return bad("state of %d bytes in an answer of %d", stateLen, len(b))
	case uint64(stateLen) > uint64(max(maxState, 0)):
		return bad("state of %d bytes, the limit is %d", stateLen, maxState)
	}
	body := b[TransformAnswerSize : len(b)-int(stateLen)]
	state := b[len(b)-int(stateLen):]
	if uint64(count)*OutputEntrySize > uint64(len(body)) {
		return bad("%d outputs cannot fit %d bytes", count, len(body))
	}
	if cap(outs) < int(count) {
		outs = make([]Output, 0, count)
	}
	// Headers and value parts of all outputs share one slice each,
	// grown as they are met (each takes at least outputHeaderSize or
	// spanSize bytes of the answer).
	spanned := uint64(len(b)) // the answer and the bytes its spans name
	last := 0
	for i := uint32(0); i < count; i++ {
		if len(body) < OutputEntrySize {
			return bad("output %d: %d bytes left, an entry is %d", i, len(body), OutputEntrySize)
		}
		from, nh := le.Uint32(body), le.Uint32(body[4:])
		o := Output{Timestamp: int64(le.Uint64(body[8:]))}
		kl, vl := le.Uint32(body[16:]), le.Uint32(body[20:])
		body = body[OutputEntrySize:]
		switch {
		case uint64(from) >= uint64(inputs):
			return bad("output %d comes from input %d of %d", i, from, inputs)
		case int(from) < last:
			return bad("output %d comes from input %d, after an output from input %d", i, from, last)
		}
		last = int(from)
		o.Input = int(from)
		var ok bool
		if int32(kl) == FromInput {
			o.Key = in.Record(o.Input).Key()
		} else if o.Key, body, ok = takeNullable(body, kl); !ok {
			return bad("output %d: key of %d bytes, %d left", i, int32(kl), len(body))
		}
		switch {
		case int32(vl) == FromInput:
			o.Value = in.Record(o.Input).Value()
		case int32(vl) == ValueSpans:
			if mem == nil {
				return bad("output %d: a value in spans of the guest's memory, which this reader does not have", i)
			}
			if len(body) < 4 {
				return bad("output %d: a span count needs 4 bytes, %d left", i, len(body))
			}
			ns := le.Uint32(body)
			body = body[4:]
			if uint64(ns)*spanSize > uint64(len(body)) {
				return bad("output %d: %d value spans cannot fit %d bytes", i, ns, len(body))
			}
			start := len(parts)
			for j := uint32(0); j < ns; j++ {
				p, n := le.Uint32(body), le.Uint32(body[4:])
				body = body[spanSize:]
				if uint64(p)+uint64(n) > uint64(len(mem)) {
					return bad("output %d: value span %d is [%d, %d), outside the guest's memory of %d bytes",
						i, j, p, uint64(p)+uint64(n), len(mem))
				}
				if spanned += uint64(n); spanned > uint64(max(maxBytes, 0)) {
					return bad("output %d: the answer with the bytes its spans name passes %d bytes", i, maxBytes)
				}
				at, end := int(p), int(p)+int(n)
				parts = append(parts, mem[at:end:end])
			}
			if ns == 0 {
				o.Value = body[:0:0]
			} else {
				o.ValueParts = parts[start:len(parts):len(parts)]
			}
		default:
			if o.Value, body, ok = takeNullable(body, vl); !ok {
				return bad("output %d: value of %d bytes, %d left", i, int32(vl), len(body))
			}
		}
		if nh == InputHeaders {
			o.InputHeaders = true
			outs = append(outs, o)
			continue
		}
		if uint64(nh)*outputHeaderSize > uint64(len(body)) {
			return bad("output %d: %d headers cannot fit %d bytes", i, nh, len(body))
		}
		start := len(hdrs)
		for j := uint32(0); j < nh; j++ {
			if len(body) < outputHeaderSize {
				return bad("output %d header %d: %d bytes left", i, j, len(body))
			}
			hk, hv := le.Uint32(body), le.Uint32(body[4:])
			body = body[outputHeaderSize:]
			if hk == math.MaxUint32 {
				return bad("output %d header %d: a header name cannot be null", i, j)
			}
			var h OutHeader
			if h.Key, body, ok = takeNullable(body, hk); !ok {
				return bad("output %d header %d: name of %d bytes, %d left", i, j, hk, len(body))
			}
			if h.Value, body, ok = takeNullable(body, hv); !ok {
				return bad("output %d header %d: value of %d bytes, %d left", i, j, int32(hv), len(body))
			}
			hdrs = append(hdrs, h)
		}
		if nh > 0 {
			o.Headers = hdrs[start:len(hdrs):len(hdrs)]
		}
		outs = append(outs, o)
	}
	if len(body) != 0 {
		return bad("%d bytes between the last output and the state", len(body))
	}
	if stateLen == 0 {
		state = nil
	}
	*a = TransformAnswer{Outputs: outs, State: state, hdrs: hdrs, parts: parts}
	return nil
}

// takeNullable takes n bytes of b (n = MaxUint32: null).
func takeNullable(b []byte, n uint32) (v, rest []byte, ok bool) {
	if n == math.MaxUint32 {
		return nil, b, true
	}
	if uint64(n) > uint64(len(b)) {
		return nil, b, false
	}
	return b[:n:n], b[n:], true
}
