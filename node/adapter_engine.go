package node

import (
	"context"
	"fmt"
	"math"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// The storage engine as the node's Storage: engine topics and partitions
// become StoredTopics and PartitionLogs, the engine's node-scoped metadata
// space becomes Metadata, and the wire's topic configuration maps to the
// engine's.

// openEngine opens the storage engine in cfg.DataDir (its LOCK, meta/,
// topics/ and ballast live beside the node's tls/ and admin.token).
func openEngine(ctx context.Context, cfg Config) (Storage, error) {
	e, err := engine.OpenContext(ctx, engine.Options{FS: cfg.FS, Dir: cfg.DataDir, Now: cfg.Now, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return &engineStorage{e: e, meta: owner.NewEngineMetadata(e)}, nil
}

type engineStorage struct {
	e    *engine.Engine
	meta owner.Metadata
}

func (s *engineStorage) Metadata() owner.Metadata { return s.meta }

func (s *engineStorage) Topics() ([]StoredTopic, error) {
	var out []StoredTopic
	for _, t := range s.e.Topics() {
		st, err := storedTopic(t)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (s *engineStorage) CreateTopic(name string, cfg wire.TopicConfig) (StoredTopic, error) {
	ec, err := engineConfig(cfg)
	if err != nil {
		return StoredTopic{}, err
	}
	t, err := s.e.CreateTopic(name, ec)
	if err != nil {
		return StoredTopic{}, err
	}
	return storedTopic(t)
}

func (s *engineStorage) DeleteTopic(name string, id fence.TopicID) error {
	t, err := s.e.Topic(name)
	if err != nil {
		return err
	}
	if t.ID() != id {
		return fmt.Errorf("%w: %q is now topic id %s", ErrUnknownTopic, name, t.ID())
	}
	return s.e.DeleteTopic(name)
}

func (s *engineStorage) Close() error { return s.e.Close() }

func storedTopic(t *engine.Topic) (StoredTopic, error) {
	st := StoredTopic{Name: t.Name(), ID: t.ID(), Config: wireConfig(t.Config())}
	for i := range t.Partitions() {
		p, err := t.Partition(i)
		if err != nil {
			return StoredTopic{}, err
		}
		st.Partitions = append(st.Partitions, owner.NewEngineLog(p))
	}
	return st, nil
}

// engineConfig maps a requested configuration; zero fields stay zero and
// take the engine's defaults.
func engineConfig(c wire.TopicConfig) (engine.TopicConfig, error) {
	ec := engine.TopicConfig{
		Partitions:   int(c.Partitions),
		SyncInterval: c.SyncInterval,
		Compression:  c.Compression,
		RetentionAge: c.RetentionAge,
		SegmentAge:   c.SegmentAge,
	}
	if c.RetentionBytes > math.MaxInt64 || c.SegmentBytes > math.MaxInt64 {
		return ec, invalidArgument("retention bytes and segment bytes must fit a signed 64-bit integer")
	}
	ec.RetentionBytes, ec.SegmentBytes, ec.MaxBatchBytes = int64(c.RetentionBytes), int64(c.SegmentBytes), int(c.MaxBatchBytes)
	switch c.Durability {
	case wire.DurabilityAlways:
		ec.Durability = engine.DurabilityAlways
	case wire.DurabilityInterval:
		ec.Durability = engine.DurabilityInterval
	case wire.DurabilityNone:
		ec.Durability = engine.DurabilityNone
	}
	if c.Timestamps == wire.TimestampModeAppend {
		ec.Timestamps = engine.TimestampAppend
	}
	return ec, nil
}

// wireConfig describes an engine configuration (defaults filled in).
func wireConfig(c engine.TopicConfig) wire.TopicConfig {
	wc := wire.TopicConfig{
		Partitions:     uint32(c.Partitions),
		SyncInterval:   c.SyncInterval,
		Compression:    c.Compression,
		RetentionAge:   c.RetentionAge,
		RetentionBytes: uint64(c.RetentionBytes),
		SegmentBytes:   uint64(c.SegmentBytes),
		SegmentAge:     c.SegmentAge,
		MaxBatchBytes:  uint32(c.MaxBatchBytes),
		Timestamps:     wire.TimestampModeProducer,
	}
	switch c.Durability {
	case engine.DurabilityAlways:
		wc.Durability = wire.DurabilityAlways
	case engine.DurabilityInterval:
		wc.Durability = wire.DurabilityInterval
	case engine.DurabilityNone:
		wc.Durability = wire.DurabilityNone
	}
	if c.Timestamps == engine.TimestampAppend {
		wc.Timestamps = wire.TimestampModeAppend
	}
	return wc
}
