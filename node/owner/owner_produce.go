package owner

import (
	"context"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/record"
)

// NoAppendTime is ProduceResult.AppendTime when the log stamped no time.
// It is the protocol's value (wire.NoAppendTime), so that a reply carries
// it as it is.
const NoAppendTime int64 = -1

// ProduceResult says where a batch was appended.
type ProduceResult struct {
	Base, Last uint64 // offsets of the batch's first and last record
	// Duplicate: the batch is a retry of one appended before; Base and Last
	// are the original offsets and nothing was appended.
	Duplicate bool
	// AppendTime is the time (unix ms) the log stamped on the batch of an
	// append-time topic, or NoAppendTime: on a topic that keeps
	// producer timestamps, and for a duplicate (nothing was stamped; the
	// original's time is in the stored batch).
	AppendTime int64
}

// Produce appends a batch and returns once it is durable per the topic's
// policy: OrderProduce, then the wait for durability.
func (o *Owner) Produce(ctx context.Context, batch []byte) (ProduceResult, error) {
	res, d, err := o.OrderProduce(ctx, batch)
	if err != nil {
		return ProduceResult{}, err
	}
	if err := d.Wait(ctx); err != nil {
		return ProduceResult{}, err
	}
	return res, nil
}

// OrderProduce is the ordering half of Produce. It checks the batch and
// appends it in the partition's order, and returns at once with its
// offsets and the Durable that says when it is durable. The next batch of
// the partition may be ordered as soon as OrderProduce returned; it lands
// after this one. The result must not be acknowledged before the
// Durable's Wait returned nil.
//
// A batch with a producer id is checked against the node-wide
// registration and the producer's sequence on this partition: the next
// sequence is appended; a retry of a remembered batch is answered with its
// original offsets (its Durable waits for the original); a gap, a fenced
// or unknown producer are refused with a fence error and nothing is
// appended. A done ctx refuses the batch before anything is appended.
func (o *Owner) OrderProduce(ctx context.Context, batch []byte) (ProduceResult, Durable, error) {
	return o.OrderProduceOwned(ctx, batch, nil)
}

// ownedAppender is a PartitionLog that tells when it lets go of an
// appended batch (EngineLog).
type ownedAppender interface {
	// AppendOwned is Append, calling release once the log no longer holds
	// batch (never, if it keeps it; not at all if it returns an error).
	AppendOwned(batch []byte, release func()) (base, last uint64, err error)
}

// OrderProduceOwned is OrderProduce for a caller that wants batch's memory
// back. release, when not nil, is called exactly once when the log no
// longer holds batch — before OrderProduceOwned returns when the batch is
// not appended (an error, a duplicate) — or never, when the log keeps it
// (a log that cannot tell keeps every batch).
func (o *Owner) OrderProduceOwned(ctx context.Context, batch []byte, release func()) (ProduceResult, Durable, error) {
	appended := false
	if release != nil {
		defer func() {
			if !appended {
				release()
			}
		}()
	}
	h, err := record.ParseBatchHeader(batch)
	if err != nil {
		return ProduceResult{}, Durable{}, err
	}
	r := produceRequest(h)
	o.appendMu.Lock()
	defer o.appendMu.Unlock()
	if err := o.refuseClosed(); err != nil {
		return ProduceResult{}, Durable{}, err
	}
	if err := ctx.Err(); err != nil {
		return ProduceResult{}, Durable{}, err
	}
	if r.Producer != 0 {
		if o.producers == nil {
			return ProduceResult{}, Durable{}, ErrNoProducers
		}
		// Checked and appended in one step: no other batch of this
		// partition comes between the check and the append.
		s, _ := o.log.ProducerState(r.Producer)
		v, err := fence.CheckProduce(o.producers.Registration(r.Producer), &s, r)
		if err != nil {
			return ProduceResult{}, Durable{}, err
		}
		if v.Duplicate {
			// The original may not be durable yet: answer only once it
			// is, as the original reply would have.
			res := ProduceResult{Base: v.Base, Last: v.Last, Duplicate: true, AppendTime: NoAppendTime}
			return res, Durable{log: o.log, off: v.Last}, nil
		}
	}
	var base, last uint64
	if oa, ok := o.log.(ownedAppender); ok && release != nil {
		// A batch the log takes is its to hand back.
		base, last, err = oa.AppendOwned(batch, release)
	} else {
		base, last, err = o.log.Append(batch)
	}
	if err != nil {
		return ProduceResult{}, Durable{}, err
	}
	appended = true
	// Still under appendMu: the index sees appends in offset order. The
	// batch is the log's now, and unchanged but for its stamped header.
	o.keys.appended(batch, base, last)
	res := ProduceResult{Base: base, Last: last, AppendTime: NoAppendTime}
	if o.appendTime {
		// The log stamped the header in place before Append returned, and
		// only reads the batch from then on.
		if sh, err := record.ParseBatchHeader(batch); err == nil && sh.AppendTime() {
			res.AppendTime = sh.MaxTimestamp
		}
	}
	return res, Durable{log: o.log, off: last}, nil
}
