package node

import (
	"context"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// ProduceResult says where a batch was appended.
type ProduceResult struct {
	Base, Last uint64 // offsets of the batch's first and last record
	// Duplicate: the batch is a retry of one appended before; Base and Last
	// are the original offsets and nothing was appended.
	Duplicate bool
}

// Produce appends a batch and returns once it is durable per the topic's
// policy. A batch with a producer id is checked against the node-wide
// registration and the producer's sequence on this partition: the next
// sequence is appended; a retry of a remembered batch is answered with its
// original offsets (once those are durable); a gap, a fenced or unknown
// producer are refused with a fence error and nothing is appended.
func (o *Owner) Produce(ctx context.Context, batch []byte) (ProduceResult, error) {
	h, err := wire.ParseBatchHeader(batch)
	if err != nil {
		return ProduceResult{}, err
	}
	r := produceRequest(h)
	o.mu.Lock()
	if r.Producer != 0 && !o.skipFence {
		if o.producers == nil {
			o.mu.Unlock()
			return ProduceResult{}, errNoProducers
		}
		// Checked and appended in one owner step: no other batch of this
		// partition can come between the check and the append.
		s, _ := o.log.ProducerState(r.Producer)
		v, err := fence.CheckProduce(o.producers.Registration(r.Producer), &s, r)
		if err != nil {
			o.mu.Unlock()
			return ProduceResult{}, err
		}
		if v.Duplicate {
			o.mu.Unlock()
			// The original may not be durable yet: answer only once it
			// is, as the original reply would have.
			if err := o.log.WaitDurable(ctx, v.Last); err != nil {
				return ProduceResult{}, err
			}
			return ProduceResult{Base: v.Base, Last: v.Last, Duplicate: true}, nil
		}
	}
	base, last, err := o.log.Append(batch)
	o.mu.Unlock()
	if err != nil {
		return ProduceResult{}, err
	}
	if err := o.log.WaitDurable(ctx, last); err != nil {
		return ProduceResult{}, err
	}
	return ProduceResult{Base: base, Last: last}, nil
}
