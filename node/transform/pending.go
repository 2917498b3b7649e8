package transform

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ledgemq/ledge/fence"
)

// The group state of a transform on an input partition (the keys of its
// fenced state store, committed with the input offset):
//
//	t/state    the plugin's state as of the committed input offset
//	t/pending  a step whose outputs may have been appended: pending
//	t/pstate   the plugin's state after that step
//
// A step with outputs is written as pending (at the committed offset, so
// the input does not move yet) before its output batch is appended; the
// next write of the partition promotes it: the committed offset moves to
// its Next and t/pstate becomes t/state. A runner taking the partition
// over decides from the output partition's producer state whether the
// batch landed (promote) or not (discard, and process the input again).
var (
	keyState        = []byte("t/state")
	keyPending      = []byte("t/pending")
	keyPendingState = []byte("t/pstate")
	keyPrefix       = []byte("t/")
)

// pending is a step whose output batch was about to be appended: the
// input [From, Next) and the one batch it appends to output partition
// Dst as producer (Producer, Epoch) with sequences [FirstSeq, LastSeq].
type pending struct {
	From, Next        uint64
	Producer          fence.ProducerID
	Epoch             fence.ProducerEpoch
	Dst               uint32
	FirstSeq, LastSeq int32
	// Inputs and Outputs count the step's records (for the status).
	Inputs, Outputs uint32
}

const (
	pendingVersion = 1
	pendingSize    = 1 + 8 + 8 + 8 + 4 + 4 + 4 + 4 + 4 + 4
)

var errBadPending = errors.New("transform: a stored pending step is corrupt")

func (p pending) encode() []byte {
	b := make([]byte, 0, pendingSize)
	b = append(b, pendingVersion)
	b = binary.BigEndian.AppendUint64(b, p.From)
	b = binary.BigEndian.AppendUint64(b, p.Next)
	b = binary.BigEndian.AppendUint64(b, uint64(p.Producer))
	b = binary.BigEndian.AppendUint32(b, uint32(p.Epoch))
	b = binary.BigEndian.AppendUint32(b, p.Dst)
	b = binary.BigEndian.AppendUint32(b, uint32(p.FirstSeq))
	b = binary.BigEndian.AppendUint32(b, uint32(p.LastSeq))
	b = binary.BigEndian.AppendUint32(b, p.Inputs)
	b = binary.BigEndian.AppendUint32(b, p.Outputs)
	return b
}

func decodePending(b []byte) (pending, error) {
	switch {
	case len(b) == 0:
		return pending{}, fmt.Errorf("%w: empty", errBadPending)
	case b[0] != pendingVersion:
		return pending{}, fmt.Errorf("%w: version %d, this node knows %d", errBadPending, b[0], pendingVersion)
	case len(b) != pendingSize:
		return pending{}, fmt.Errorf("%w: %d bytes, want %d", errBadPending, len(b), pendingSize)
	}
	be := binary.BigEndian
	p := pending{
		From: be.Uint64(b[1:]), Next: be.Uint64(b[9:]), Producer: fence.ProducerID(be.Uint64(b[17:])),
		Epoch: fence.ProducerEpoch(be.Uint32(b[25:])), Dst: be.Uint32(b[29:]),
		FirstSeq: int32(be.Uint32(b[33:])), LastSeq: int32(be.Uint32(b[37:])),
		Inputs: be.Uint32(b[41:]), Outputs: be.Uint32(b[45:]),
	}
	if p.Next < p.From {
		return pending{}, fmt.Errorf("%w: input [%d, %d)", errBadPending, p.From, p.Next)
	}
	return p, nil
}

// landed reports whether the producer state s of p.Producer on the
// output partition holds p's batch: the same epoch and a remembered batch
// with p's sequences. A newer incarnation's state never holds it: the
// batch of an older epoch can no longer be appended.
func (p pending) landed(s fence.ProducerState, ok bool) bool {
	if !ok || s.Epoch != p.Epoch {
		return false
	}
	for i := range s.Len() {
		if b := s.Batch(i); b.FirstSeq == p.FirstSeq && b.LastSeq == p.LastSeq {
			return true
		}
	}
	return false
}
