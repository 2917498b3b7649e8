package owner

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/ledgemq/ledge/fence"
)

// Metadata keys of the producer registry.
var (
	keyProducerNext   = []byte("producers/next")
	keyProducerIDs    = []byte("producers/id/")
	keyProducerByName = []byte("producers/name/")
)

// Producers is the node-wide registry of idempotent producers: for each
// producer id, the epoch of its newest incarnation. Every owner checks
// batches against it, so a newer incarnation fences the old one on every
// partition at once, including partitions it has not written yet.
type Producers struct {
	meta Metadata

	initMu sync.Mutex // serializes Init across its sync

	mu     sync.RWMutex
	epochs map[fence.ProducerID]fence.ProducerEpoch
	byName map[string]fence.ProducerID
	next   fence.ProducerID // next id to hand out
}

// OpenProducers loads the registry from meta.
func OpenProducers(meta Metadata) (*Producers, error) {
	p := &Producers{
		meta:   meta,
		epochs: map[fence.ProducerID]fence.ProducerEpoch{},
		byName: map[string]fence.ProducerID{},
		next:   1,
	}
	if v, ok, err := meta.Get(keyProducerNext); err != nil {
		return nil, err
	} else if ok {
		if len(v) != 8 {
			return nil, fmt.Errorf("owner: producer registry: bad next id (%d bytes)", len(v))
		}
		p.next = fence.ProducerID(binary.BigEndian.Uint64(v))
	}
	err := meta.Scan(keyProducerIDs, func(k, v []byte) error {
		if len(k) != len(keyProducerIDs)+8 || len(v) != 4 {
			return fmt.Errorf("owner: producer registry: bad entry %q", k)
		}
		p.epochs[fence.ProducerID(binary.BigEndian.Uint64(k[len(keyProducerIDs):]))] = fence.ProducerEpoch(binary.BigEndian.Uint32(v))
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = meta.Scan(keyProducerByName, func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("owner: producer registry: bad name entry %q", k)
		}
		p.byName[string(k[len(keyProducerByName):])] = fence.ProducerID(binary.BigEndian.Uint64(v))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// ProducerIdentity is what Init hands a producer: the id and epoch it
// stamps on its batches, numbering each partition's batches from 0.
type ProducerIdentity struct {
	ID    fence.ProducerID
	Epoch fence.ProducerEpoch
}

// Init registers a producer incarnation and returns its identity once the
// registration is durable. An empty name gets a fresh id at epoch 0. A name
// seen before keeps its id and gets the next epoch, which fences every
// earlier incarnation under that name (their batches fail with
// fence.ErrFencedProducer); when the epoch space is exhausted the name
// moves to a fresh id.
func (p *Producers) Init(ctx context.Context, name string) (ProducerIdentity, error) {
	p.initMu.Lock()
	defer p.initMu.Unlock()

	p.mu.RLock()
	id, named := p.byName[name]
	epoch, known := p.epochs[id]
	next := p.next
	p.mu.RUnlock()

	fresh := name == "" || !named || !known || epoch == math.MaxUint32
	if fresh {
		id, epoch = next, 0
		next++
	} else {
		epoch++
	}
	var b [8]byte
	if fresh {
		binary.BigEndian.PutUint64(b[:], uint64(next))
		if _, err := p.meta.Put(keyProducerNext, b[:]); err != nil {
			return ProducerIdentity{}, err
		}
	}
	if name != "" {
		binary.BigEndian.PutUint64(b[:], uint64(id))
		if _, err := p.meta.Put(append(append([]byte{}, keyProducerByName...), name...), b[:]); err != nil {
			return ProducerIdentity{}, err
		}
	}
	var e [4]byte
	binary.BigEndian.PutUint32(e[:], uint32(epoch))
	t, err := p.meta.Put(producerKey(id), e[:])
	if err != nil {
		return ProducerIdentity{}, err
	}
	// The identity is handed out only once it is durable, so no epoch is
	// ever handed out twice, even across a crash.
	if err := p.meta.Sync(ctx, t); err != nil {
		return ProducerIdentity{}, err
	}
	p.mu.Lock()
	p.epochs[id] = epoch
	if name != "" {
		p.byName[name] = id
	}
	p.next = next
	p.mu.Unlock()
	return ProducerIdentity{ID: id, Epoch: epoch}, nil
}

// Reinit starts a new incarnation of the unnamed producer id, which the
// caller holds at epoch, and returns its identity once it is durable: the
// same id at the next epoch. Every earlier incarnation of id is fenced on
// every partition from then on (fence.ErrFencedProducer on its batches),
// and no epoch is handed out twice, not even across a crash. A producer
// reinitializes this way to recover from fence.ErrOutOfOrderSequence
// without a new id.
//
// The caller must be the current incarnation: an epoch below the
// registered one is refused with fence.ErrFencedProducer (a newer
// incarnation exists; the caller is a zombie), an id or epoch the registry
// never handed out with fence.ErrUnknownProducer (Init a fresh producer).
// When the epoch space is exhausted the producer gets a fresh id at epoch 0.
func (p *Producers) Reinit(ctx context.Context, id fence.ProducerID, epoch fence.ProducerEpoch) (ProducerIdentity, error) {
	p.initMu.Lock()
	defer p.initMu.Unlock()

	reg := p.Registration(id)
	// The incarnation rule is the one every batch is checked by.
	if err := fence.CheckIncarnation(reg, id, epoch); err != nil {
		return ProducerIdentity{}, err
	}
	p.mu.RLock()
	next := p.next
	p.mu.RUnlock()
	fresh := reg.Epoch == math.MaxUint32
	if fresh {
		id, epoch = next, 0
		next++
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(next))
		if _, err := p.meta.Put(keyProducerNext, b[:]); err != nil {
			return ProducerIdentity{}, err
		}
	} else {
		epoch = reg.Epoch + 1
	}
	var e [4]byte
	binary.BigEndian.PutUint32(e[:], uint32(epoch))
	t, err := p.meta.Put(producerKey(id), e[:])
	if err != nil {
		return ProducerIdentity{}, err
	}
	if err := p.meta.Sync(ctx, t); err != nil {
		return ProducerIdentity{}, err
	}
	p.mu.Lock()
	p.epochs[id] = epoch
	p.next = next
	p.mu.Unlock()
	return ProducerIdentity{ID: id, Epoch: epoch}, nil
}

// Registration returns the node-wide registration of id.
func (p *Producers) Registration(id fence.ProducerID) fence.Registration {
	p.mu.RLock()
	e, ok := p.epochs[id]
	p.mu.RUnlock()
	return fence.Registration{Epoch: e, Known: ok}
}

func producerKey(id fence.ProducerID) []byte {
	k := make([]byte, len(keyProducerIDs)+8)
	copy(k, keyProducerIDs)
	binary.BigEndian.PutUint64(k[len(keyProducerIDs):], uint64(id))
	return k
}

// ErrNoProducers is returned when an idempotent batch reaches an owner
// that was built without a producer registry.
var ErrNoProducers = errors.New("owner: idempotent batch, but the owner has no producer registry")
