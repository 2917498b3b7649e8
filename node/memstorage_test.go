package node

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/wire"
)

// memStorage is an in-memory Storage over the owner tests' ownertest.Log and
// ownertest.Meta. Its logs verify batches as the engine does, and their
// durability can be held back (holdDurability) to observe pipelining.
type memStorage struct {
	meta *ownertest.Meta

	mu     sync.Mutex
	topics map[string]StoredTopic
	// held, when non-nil, blocks every WaitDurable until it is closed.
	held chan struct{}
	// onClose, when set, is called by Close.
	onClose func()
}

func newMemStorage() *memStorage {
	return &memStorage{meta: ownertest.NewMeta(), topics: map[string]StoredTopic{}}
}

func (s *memStorage) Metadata() owner.Metadata { return s.meta }

func (s *memStorage) Topics() ([]StoredTopic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]StoredTopic, 0, len(s.topics))
	for _, t := range s.topics {
		out = append(out, t)
	}
	return out, nil
}

func (s *memStorage) CreateTopic(name string, cfg wire.TopicConfig) (StoredTopic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.topics[name]; ok {
		return StoredTopic{}, fmt.Errorf("%w: %q", ErrTopicExists, name)
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = 1
	}
	if cfg.Durability == wire.DurabilityDefault {
		cfg.Durability = wire.DurabilityAlways
	}
	if cfg.Timestamps == wire.TimestampModeDefault {
		cfg.Timestamps = wire.TimestampModeProducer
	}
	if cfg.MaxBatchBytes == 0 {
		cfg.MaxBatchBytes = 4 << 20
	}
	st := StoredTopic{Name: name, Config: cfg}
	_, _ = rand.Read(st.ID[:])
	for i := range cfg.Partitions {
		st.Partitions = append(st.Partitions, &memPartition{
			Log: ownertest.NewLog(s.meta, fmt.Sprintf("%s/%d", st.ID, i)), s: s,
		})
	}
	s.topics[name] = st
	return st, nil
}

// topic returns the stored topic name; tests call it while the node's
// handlers may be creating others.
func (s *memStorage) topic(name string) StoredTopic {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.topics[name]
}

func (s *memStorage) DeleteTopic(name string, id fence.TopicID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.topics[name]; !ok || t.ID != id {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	delete(s.topics, name)
	return nil
}

func (s *memStorage) Close() error {
	if s.onClose != nil {
		s.onClose()
	}
	return nil
}

// holdDurability makes every durability wait block until the returned
// function is called.
func (s *memStorage) holdDurability() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.held = ch
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.held = nil
		s.mu.Unlock()
		close(ch)
	}
}

// memPartition is a ownertest.Log that verifies batches and whose durability can
// be held back.
type memPartition struct {
	*ownertest.Log
	s *memStorage
}

func (p *memPartition) Append(batch []byte) (uint64, uint64, error) {
	if _, err := record.VerifyBatch(batch, record.BatchMaxSize); err != nil {
		return 0, 0, err
	}
	return p.Log.Append(batch)
}

func (p *memPartition) WaitDurable(ctx context.Context, off uint64) error {
	p.s.mu.Lock()
	held := p.s.held
	p.s.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return p.Log.WaitDurable(ctx, off)
}
