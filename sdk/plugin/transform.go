package plugin

import (
	"errors"

	"github.com/ledgemq/ledge/plugins/abi"
)

// Transform turns a batch of records into output records: zero or more
// per input (a map, a filter-map, a flat-map), emitted into out in input
// order. s holds the state the previous batch left (empty at first); a
// transform that aggregates across batches keeps it there, and nowhere
// else: the host may run each batch on another instance, and a restart
// hands back only the state. An error fails the batch: the node retries
// it with the same state.
type Transform func(b *Batch, s *State, out *Output) error

// RegisterTransform registers the plugin's transform. setup runs once per
// instance with the transform's parameters; an error it returns fails
// the batch with its message. A plugin registers at most one transform.
func RegisterTransform(setup func(Params) (Transform, error)) {
	if registry.transform != nil {
		panic("plugin: a transform is already registered")
	}
	registry.transform = setup
}

// Header is a header of an output record; a nil Value is null.
type Header = abi.OutHeader

// State is a transform's state between batches: opaque bytes the host
// stores with the outputs and hands back with the next batch.
type State struct {
	prev, next []byte
	set        bool
}

// Bytes returns the state: the one the previous batch left, or the one
// Set gave during this call. It aliases the plugin's input; copy what
// must outlive the call.
func (s *State) Bytes() []byte {
	if s.set {
		return s.next
	}
	return s.prev
}

// Set replaces the state the next batch receives. b is read when the
// call returns. Without a call to Set the state stays as it was.
func (s *State) Set(b []byte) { s.next, s.set = b, true }

// Output collects a transform's output records.
type Output struct {
	enc   abi.OutputEncoder
	batch *Batch
	// parts keeps the parts of EmitValueParts reachable until the host
	// has read them (the next call); joined holds them joined in a
	// native build.
	parts  [][]byte
	joined []byte
}

// Emit outputs a record coming from input record i (0 <= i < Len() of the
// batch), with that record's timestamp. Outputs must follow the inputs'
// order: an output from record i may not come after one from a later
// record (Emit panics). A nil key or value is null. key, value and headers
// are copied into the answer.
func (o *Output) Emit(i int, key, value []byte, headers ...Header) {
	o.EmitAt(i, o.batch.Record(i).Timestamp(), key, value, headers...)
}

// EmitAt is Emit with a timestamp of its own (unix milliseconds).
func (o *Output) EmitAt(i int, timestamp int64, key, value []byte, headers ...Header) {
	o.check(i)
	o.enc.Add(i, timestamp, key, value, headers...)
}

// EmitValue outputs input record i with a new value: its timestamp, key
// and headers are the input's, which the host takes from the input as it
// gave it (changes the plugin made to them in place are not seen), with
// no copy. The common map.
func (o *Output) EmitValue(i int, value []byte) {
	o.check(i)
	o.enc.AddInput(i, o.batch.Record(i).Timestamp(), abi.TakeKey|abi.TakeHeaders, nil, value)
}

// EmitValueParts outputs input record i with a new value, the parts
// joined: its timestamp, key and headers are the input's, as for
// EmitValue. The parts are not copied into the answer: the host reads
// them from the plugin's memory when the call returns, so they must stay
// unchanged until then. A part may be a constant, or bytes of the input
// (a record's value changed in place, a piece of it); a buffer reused for
// the next record is not one (every output would get its last contents:
// use EmitValue for that). Wrapping each value in an envelope copies
// nothing in the plugin:
//
//	out.EmitValueParts(i, prefix, b.Record(i).Value(), suffix)
//
// In a native build (RunTransform) the parts are copied at once.
func (o *Output) EmitValueParts(i int, parts ...[]byte) {
	o.check(i)
	o.emitParts(i, o.batch.Record(i).Timestamp(), parts)
}

// Pass outputs input record i unchanged: its timestamp, key, value and
// headers, which the host takes from the input as it gave it (changes
// the plugin made in place are not seen), with no copy.
func (o *Output) Pass(i int) {
	o.check(i)
	o.enc.AddInput(i, o.batch.Record(i).Timestamp(), abi.TakeKey|abi.TakeValue|abi.TakeHeaders, nil, nil)
}

func (o *Output) check(i int) {
	if uint(i) >= uint(o.batch.Len()) {
		panic("plugin: output from a record outside the batch")
	}
}

// Len returns the number of records output so far.
func (o *Output) Len() int { return o.enc.Len() }

// runTransform runs the transform over an input region and the previous
// state and returns the encoded answer (valid until the next call).
func (k *kernel) runTransform(region, state []byte) ([]byte, error) {
	if k.transform == nil {
		return nil, errors.New("ledge_transform called on an instance not initialized as a transform")
	}
	v, err := abi.Parse(region)
	if err != nil {
		return nil, err
	}
	k.batch.v = v
	k.out.batch = &k.batch
	k.out.enc.Reset()
	clear(k.out.parts)
	k.out.parts = k.out.parts[:0]
	k.state = State{prev: state}
	if err := k.transform(&k.batch, &k.state, &k.out); err != nil {
		return nil, err
	}
	return k.out.enc.Finish(k.state.Bytes()), nil
}
