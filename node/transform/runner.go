package transform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/record"
)

// Input is a partition of a transform's input topic as the runner reads
// it: *owner.Owner is one. Every call is fenced by the owner: polls,
// state loads and commits of a member that lost the partition are
// refused.
type Input interface {
	Poll(ctx context.Context, req owner.PollRequest) (owner.PollResult, error)
	LoadStateQuery(ctx context.Context, c owner.Consumer, q owner.StateQuery) (owner.StateSnapshot, error)
	CommitState(ctx context.Context, req owner.CommitRequest, changes []owner.StateChange) error
	InspectState(ctx context.Context, group string, q owner.StateQuery) (owner.StateSnapshot, error)
	State() owner.PartitionState
	Skipped(from, to uint64) uint64
}

// Output is a partition of a transform's output topic: *owner.Owner is
// one. Appends are an idempotent producer's, checked by the owner.
type Output interface {
	Produce(ctx context.Context, batch []byte) (owner.ProduceResult, error)
	ProducerState(id fence.ProducerID) (fence.ProducerState, bool, owner.Durable)
}

// ownedOutput is an Output that hands a batch's memory back once its log
// lets go of it: *owner.Owner is one (Owner.OrderProduceOwned; its
// Produce is OrderProduce and the wait for durability). The runner builds
// a later step's batch in that memory.
type ownedOutput interface {
	OrderProduceOwned(ctx context.Context, batch []byte, release func()) (owner.ProduceResult, owner.Durable, error)
}

// Partition is a partition of a topic, as input or as output.
type Partition interface {
	Input
	Output
}

// Plugin runs transform plugins (Registry adapts the node's plugin
// registry). TransformFunc is plugins.Host.TransformFunc: use gets the
// answer while the plugin holds it, and copies what outlives the call.
type Plugin interface {
	TransformFunc(ctx context.Context, name string, params plugins.Params, v *plugins.View, state []byte,
		use func(plugins.TransformResult) error) error
}

// Producers hands out idempotent producer identities (*owner.Producers):
// Init under a name seen before keeps the id and bumps the epoch, which
// fences every earlier incarnation.
type Producers interface {
	Init(ctx context.Context, name string) (owner.ProducerIdentity, error)
}

// Tuning of a partition's runner.
const (
	// pollBytes bounds a step's input (whole stored batches, at least one).
	pollBytes = 1 << 20
	// idleWait is how long an idle runner's poll waits for records.
	idleWait = 5 * time.Second
	// callWait bounds a plugin call, its wait for a worker and an
	// instance included. It is well above the longest call deadline
	// (plugins.call_timeout, at most 10s), so that a plugin running past
	// its deadline is judged for it rather than abandoned.
	callWait = 30 * time.Second
)

// errTooLarge: the outputs of one input record do not fit a batch of the
// output topic.
var errTooLarge = errors.New("transform: the outputs of one input record exceed the output topic's largest batch")

// pluginError is a failure of the plugin's call: nothing of the step
// was written.
type pluginError struct{ err error }

func (e pluginError) Error() string { return e.err.Error() }
func (e pluginError) Unwrap() error { return e.err }

// partRunner runs a transform on one input partition for one assignment:
// it is created when the member receives the partition and stopped when
// it loses it.
type partRunner struct {
	spec      Spec
	params    plugins.Params
	part      uint32
	in        Input
	out       Output
	dst       uint32
	maxBatch  int
	consumer  owner.Consumer
	plugin    Plugin
	producers Producers
	stats     *partStats

	// The step's working state.
	id        owner.ProducerIdentity
	seq       int32
	state     []byte // as of committed
	committed uint64 // the input offset the state is at
	// carry is a pending step whose batch is appended (durably) but not
	// yet promoted: the next write promotes it.
	carry *promotion
	bb    record.BatchBuilder
	hdrs  []record.Header // an output's headers while its batch is built
	// spare is the memory of the last appended batch once the output
	// log let go of it (an ownedOutput's release): the next step's batch
	// is built in it. An idle runner lets it go.
	spare chan []byte
}

type promotion struct {
	p     pending
	state []byte
}

// producerName is the producer a transform appends with from an input
// partition.
func producerName(spec Spec, part uint32) string {
	return fmt.Sprintf("%s%s/%d", GroupPrefix, spec.Name, part)
}

// run processes the partition until ctx ends. A failure (a plugin's, a
// fence's, the output's) is counted in the status and the runner starts
// again from what is committed, after a backoff.
func (r *partRunner) run(ctx context.Context, backoff func(failures int) time.Duration) {
	failures, fresh := 0, true
	for ctx.Err() == nil {
		progressed, err := r.session(ctx, fresh)
		if ctx.Err() != nil {
			return
		}
		// A plugin's failure wrote nothing: the runner goes on from where
		// it is, without a new incarnation. Any other failure may have
		// left a step half done: the next session recovers it.
		fresh = !errors.As(err, new(pluginError))
		if progressed {
			failures = 0
		}
		failures++
		r.stats.fail(err)
		t := time.NewTimer(backoff(failures))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// session takes the partition up from what is committed and processes it
// until an error. progressed says whether a step was committed.
func (r *partRunner) session(ctx context.Context, fresh bool) (progressed bool, err error) {
	if fresh {
		if err := r.recover(ctx); err != nil {
			return false, err
		}
	}
	for {
		if err := r.step(ctx); err != nil {
			return progressed, err
		}
		progressed = true
	}
}

// recover starts an incarnation: a new producer epoch (fencing every
// earlier incarnation's appends), then the committed state and a pending
// step's fate, decided from the output partition's producer state.
func (r *partRunner) recover(ctx context.Context) error {
	id, err := r.producers.Init(ctx, producerName(r.spec, r.part))
	if err != nil {
		return fmt.Errorf("transform: producer: %w", err)
	}
	r.id, r.seq, r.carry = id, 0, nil
	snap, err := r.in.LoadStateQuery(ctx, r.consumer, owner.StateQuery{Prefix: keyPrefix})
	if err != nil {
		return fmt.Errorf("transform: load state: %w", err)
	}
	r.committed, r.state = snap.Next, nil
	var pendRaw, pendState []byte
	for _, e := range snap.Entries {
		switch {
		case bytes.Equal(e.Key, keyState):
			r.state = e.Value
		case bytes.Equal(e.Key, keyPending):
			pendRaw = e.Value
		case bytes.Equal(e.Key, keyPendingState):
			pendState = e.Value
		}
	}
	r.stats.setCommitted(r.committed)
	if pendRaw == nil {
		return nil
	}
	p, err := decodePending(pendRaw)
	if err != nil {
		return err
	}
	if p.From != r.committed || snap.Resolved.Moved {
		// The input's history moved (a purge, a lossy recovery) since:
		// the step's input is gone; its state is not taken.
		return nil
	}
	s, ok, d := r.out.ProducerState(p.Producer)
	if !p.landed(s, ok) {
		// Never appended, and never will be (its epoch is fenced now):
		// the input is processed again.
		return nil
	}
	if err := d.Wait(ctx); err != nil {
		return fmt.Errorf("transform: output: %w", err)
	}
	r.carry = &promotion{p: p, state: pendState}
	return nil
}

// step processes one poll of input: the outputs and the new state are
// written as pending, the output batch appended, and the step left to
// the next write to promote. A step without outputs commits at once.
func (r *partRunner) step(ctx context.Context) error {
	from := r.committed
	if r.carry != nil {
		from = r.carry.p.Next
	}
	wait := idleWait
	if r.carry != nil {
		wait = 0 // promote soon, with or without more input
	}
	res, err := r.in.Poll(ctx, owner.PollRequest{Consumer: r.consumer, From: owner.FromOffset, Offset: from,
		MaxBytes: pollBytes, MaxWait: wait})
	if err != nil {
		return fmt.Errorf("transform: poll: %w", err)
	}
	defer res.Release()
	r.stats.setHigh(res.State.HighWatermark)
	if res.Token.Next <= from {
		r.dropSpare()
		if r.carry == nil {
			return nil
		}
		return r.commit(ctx, res.Token, from, r.promoteChanges(nil), nil)
	}
	v, err := plugins.NewView(plugins.PollResult{Topic: r.spec.From, Partition: int32(r.part), From: from,
		Next: res.Token.Next, Batches: res.Batches})
	if err != nil {
		return fmt.Errorf("transform: input: %w", err)
	}
	defer v.Release()
	state := r.state
	if r.carry != nil {
		state = r.carry.state
	}
	out, err := r.transform(ctx, v, res.Batches, from, res.Token.Next, state)
	if err != nil {
		return err
	}
	if out.batch == nil {
		// Nothing to append: the input moves with the state at once.
		changes := r.promoteChanges(nil)
		changes = append(changes, stateChange(keyState, out.state), owner.StateChange{Key: keyPending, Delete: true},
			owner.StateChange{Key: keyPendingState, Delete: true})
		return r.commit(ctx, res.Token, out.next, changes, &stepCounts{inputs: out.inputs})
	}
	p := pending{From: from, Next: out.next, Producer: r.id.ID, Epoch: r.id.Epoch, Dst: r.dst,
		FirstSeq: r.seq, LastSeq: fence.ProduceRequest{BaseSequence: r.seq, Count: int32(out.outputs)}.LastSequence(),
		Inputs: uint32(out.inputs), Outputs: uint32(out.outputs)}
	changes := r.promoteChanges(&p)
	changes = append(changes, owner.StateChange{Key: keyPending, Value: p.encode()}, stateChange(keyPendingState, out.state))
	if err := r.commit(ctx, res.Token, from, changes, nil); err != nil {
		return err
	}
	if err := r.append(ctx, out.batch); err != nil {
		return fmt.Errorf("transform: append to %s: %w", r.spec.To, err)
	}
	r.seq = (p.LastSeq + 1) & (1<<31 - 1)
	r.carry = &promotion{p: p, state: out.state}
	return nil
}

// append appends a step's batch to the output partition and waits until
// it is durable per the output topic's policy. An ownedOutput hands the
// batch's memory back to the runner once it is written.
func (r *partRunner) append(ctx context.Context, batch []byte) error {
	oo, ok := r.out.(ownedOutput)
	if !ok {
		_, err := r.out.Produce(ctx, batch)
		return err
	}
	if r.spare == nil {
		r.spare = make(chan []byte, 1)
	}
	spare := r.spare
	_, d, err := oo.OrderProduceOwned(ctx, batch, func() {
		select {
		case spare <- batch[:0]:
		default:
		}
	})
	if err != nil {
		return err
	}
	return d.Wait(ctx)
}

// batchBuffer returns an empty buffer of at least n bytes: the spare, or
// new memory.
func (r *partRunner) batchBuffer(n int) []byte {
	select {
	case b := <-r.spare:
		if cap(b) >= n {
			return b
		}
	default:
	}
	return make([]byte, 0, n)
}

// dropSpare lets the spare go, if any.
func (r *partRunner) dropSpare() {
	select {
	case <-r.spare:
	default:
	}
}

// promoteChanges are the state changes that promote the carried step:
// its state becomes the committed state. next, when set, is the pending
// step the same write records (its keys are written by the caller); else
// the pending keys are deleted.
func (r *partRunner) promoteChanges(next *pending) []owner.StateChange {
	if r.carry == nil {
		return nil
	}
	changes := []owner.StateChange{stateChange(keyState, r.carry.state)}
	if next == nil {
		changes = append(changes, owner.StateChange{Key: keyPending, Delete: true}, owner.StateChange{Key: keyPendingState, Delete: true})
	}
	return changes
}

type stepCounts struct{ inputs int }

// commit writes the input offset and the changes under the poll's token,
// and notes the promotion of the carried step (and a step without
// outputs) in the state and the status.
func (r *partRunner) commit(ctx context.Context, tok fence.Token, offset uint64, changes []owner.StateChange, direct *stepCounts) error {
	err := r.in.CommitState(ctx, owner.CommitRequest{Consumer: r.consumer, Token: tok, Offset: offset}, changes)
	if err != nil {
		return fmt.Errorf("transform: commit: %w", err)
	}
	if c := r.carry; c != nil {
		r.state, r.committed, r.carry = c.state, c.p.Next, nil
		r.stats.promoted(int(c.p.Inputs), int(c.p.Outputs))
	}
	for _, ch := range changes {
		if bytes.Equal(ch.Key, keyState) {
			r.state = ch.Value
		}
	}
	r.committed = offset
	if direct != nil {
		r.stats.promoted(direct.inputs, 0)
	}
	r.stats.setCommitted(offset)
	return nil
}

func stateChange(key, value []byte) owner.StateChange {
	if len(value) == 0 {
		return owner.StateChange{Key: key, Delete: true}
	}
	return owner.StateChange{Key: key, Value: value}
}
