package engine

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/record"
)

// Durability is a topic's policy for acknowledging appends.
type Durability uint8

const (
	// DurabilityAlways acknowledges an append after its bytes are fsynced.
	// Concurrent appends share one fsync (group commit), and readers only
	// ever see durable records.
	DurabilityAlways Durability = iota + 1
	// DurabilityInterval acknowledges an append once it is written to the
	// page cache and fsyncs at least every SyncInterval. A power loss may
	// lose the last interval; the recovery then bumps the history epoch.
	DurabilityInterval
	// DurabilityNone acknowledges an append once it is written to the page
	// cache. It fsyncs a sealed segment at most 30 s after the seal (at
	// once when 32 sealed segments wait), and everything at a clean
	// shutdown; until then the kernel writes back on its own schedule.
	DurabilityNone
)

// String returns the policy's name as the CLI spells it.
func (d Durability) String() string {
	switch d {
	case DurabilityAlways:
		return "always"
	case DurabilityInterval:
		return "interval"
	case DurabilityNone:
		return "none"
	}
	return fmt.Sprintf("durability(%d)", uint8(d))
}

// ParseDurability maps "always", "interval" and "none" to a Durability.
func ParseDurability(s string) (Durability, error) {
	for _, d := range []Durability{DurabilityAlways, DurabilityInterval, DurabilityNone} {
		if d.String() == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("engine: unknown durability %q (want always, interval or none)", s)
}

// TimestampType says whose clock a topic's timestamps come from.
type TimestampType uint8

const (
	// TimestampProducer keeps the timestamps the producer set.
	TimestampProducer TimestampType = iota
	// TimestampAppend stamps every batch with the node's clock at append.
	TimestampAppend
)

// String returns "producer" or "append".
func (t TimestampType) String() string {
	if t == TimestampAppend {
		return "append"
	}
	return "producer"
}

// Defaults of TopicConfig and Options.
const (
	DefaultPartitions      = 1
	DefaultSyncInterval    = 100 * time.Millisecond
	DefaultSegmentBytes    = 64 << 20
	DefaultSegmentAge      = 7 * 24 * time.Hour
	DefaultMaxBatchBytes   = 4 << 20
	DefaultTailCacheBytes  = 32 << 20
	DefaultReaderPoolSize  = 16
	DefaultReservationStep = 1 << 20
	DefaultMinReservation  = 1024
	DefaultReservationTime = time.Second
	DefaultIndexInterval   = 4096
	DefaultMaxClockStep    = time.Hour
	DefaultReservedBytes   = 8 << 20
	minSegmentBytes        = 4096
)

// TopicConfig is fixed when a topic is created. Zero fields take the
// defaults above.
type TopicConfig struct {
	// Partitions is the number of partitions, at least 1.
	Partitions int
	// Durability defaults to DurabilityAlways.
	Durability Durability
	// SyncInterval is the fsync period of DurabilityInterval (default 100ms).
	SyncInterval time.Duration
	// Compression is what producers should use; the engine stores batches
	// as they arrive whatever their compression.
	Compression record.Compression
	// RetentionAge: sealed segments whose newest record was appended longer
	// ago than this are deleted (0 = keep forever); an idle active segment
	// that old is sealed first (see EnforceRetention). Age is measured with
	// the engine's jump-free clock (see Options.MaxClockStep).
	RetentionAge time.Duration
	// RetentionBytes bounds each partition's size: the oldest sealed
	// segments are deleted while the partition is larger (0 = unlimited).
	RetentionBytes int64
	// SegmentBytes is the size at which the active segment is sealed and a
	// new one started (default 64 MiB, at least MaxBatchBytes).
	SegmentBytes int64
	// SegmentAge seals the active segment at the next append once it is
	// this old, or, when appends stopped, at the next EnforceRetention
	// (default 7 days).
	SegmentAge time.Duration
	// Timestamps: producer time (default) or append time.
	Timestamps TimestampType
	// MaxBatchBytes bounds one appended batch (default 4 MiB, at most
	// record.BatchMaxSize).
	MaxBatchBytes int
}

func (c TopicConfig) withDefaults() (TopicConfig, error) {
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Durability == 0 {
		c.Durability = DurabilityAlways
	}
	if c.SyncInterval == 0 {
		c.SyncInterval = DefaultSyncInterval
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SegmentAge == 0 {
		c.SegmentAge = DefaultSegmentAge
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = min(DefaultMaxBatchBytes, int(c.SegmentBytes))
	}
	switch {
	case c.Partitions < 1 || c.Partitions > 1<<16:
		return c, fmt.Errorf("%w: partitions %d (1..65536)", ErrInvalidConfig, c.Partitions)
	case c.Durability < DurabilityAlways || c.Durability > DurabilityNone:
		return c, fmt.Errorf("%w: durability %d", ErrInvalidConfig, c.Durability)
	case c.SyncInterval < 0 || c.SegmentAge < 0 || c.RetentionAge < 0 || c.RetentionBytes < 0:
		return c, fmt.Errorf("%w: negative duration or size", ErrInvalidConfig)
	case !c.Compression.Valid():
		return c, fmt.Errorf("%w: compression %d", ErrInvalidConfig, c.Compression)
	case c.Timestamps > TimestampAppend:
		return c, fmt.Errorf("%w: timestamp type %d", ErrInvalidConfig, c.Timestamps)
	case c.MaxBatchBytes <= record.BatchHeaderSize || c.MaxBatchBytes > record.BatchMaxSize:
		return c, fmt.Errorf("%w: max batch bytes %d (%d..%d)", ErrInvalidConfig, c.MaxBatchBytes, record.BatchHeaderSize+1, record.BatchMaxSize)
	case c.SegmentBytes < minSegmentBytes || c.SegmentBytes < int64(c.MaxBatchBytes) || c.SegmentBytes > 1<<31:
		return c, fmt.Errorf("%w: segment bytes %d (at least %d and the max batch bytes %d, at most 2 GiB)", ErrInvalidConfig, c.SegmentBytes, minSegmentBytes, c.MaxBatchBytes)
	}
	return c, nil
}

// Options configure an Engine. FS and Dir are required.
type Options struct {
	// FS is where segments and metadata live (vfs.Default in production).
	FS vfs.FS
	// Dir is the data directory.
	Dir string
	// Now is the wall clock (default time.Now). Retention and segment age
	// use a jump-free clock derived from it (see MaxClockStep).
	Now func() time.Time
	// TailCacheBytes bounds the memory of recently written batches kept for
	// reads, across all partitions (default 32 MiB; negative disables).
	TailCacheBytes int
	// ReaderPoolSize bounds the concurrent file reads of ReadPlan.Execute
	// (default 16).
	ReaderPoolSize int
	// Logger receives one line per significant event (default: discard).
	Logger *slog.Logger

	// ReservationStep is the most offsets one durable reservation covers
	// (default 1<<20); topics under DurabilityAlways reserve none. A
	// reservation covers about ReservationTime of the
	// partition's appends at the rate measured since the previous one,
	// at least MinReservationStep (or ReservationStep, if smaller) and at
	// most ReservationStep; it is extended in the background when half of
	// it is left, so appends wait for it only when it runs out (then the
	// next one is at least twice as large). Under interval and none a
	// recovery after an unclean stop skips what was reserved and not
	// used: about ReservationTime of appends.
	ReservationStep uint64
	// MinReservationStep is the fewest offsets one reservation covers
	// (default 1024): below about a thousand appends a second, a
	// reservation lasts longer than ReservationTime, so that a slow
	// partition makes a synced metadata write per 512 offsets at most.
	MinReservationStep uint64
	// ReservationTime is how long a reservation should last at the
	// partition's append rate (default 1s): a synced metadata write about
	// twice a second per busy partition.
	ReservationTime time.Duration
	// IndexIntervalBytes is the spacing of sparse index entries (default 4 KiB).
	IndexIntervalBytes int
	// MaxClockStep is the largest forward step of the wall clock that
	// counts as elapsed time for retention and segment age (default 1h).
	// Backward steps and larger forward steps (a device booting in 1970,
	// then corrected; a clock set far ahead) count as no time at all, so a
	// clock jump never deletes data early; data may be kept longer.
	MaxClockStep time.Duration
	// ReservedBytes is the size of a ballast file released when the disk
	// fills, so that retention, purge and metadata can still run (default
	// 8 MiB; negative disables).
	ReservedBytes int64

	// BeforeRead, if set, is called by ReadPlan.Execute before each file
	// read, with the read's context; a non-nil error fails the read. Tests
	// use it to suspend a read deterministically at the file read.
	BeforeRead func(ctx context.Context, r ReadInfo) error
	// BeforePurgeCommit, if set, is called by Partition.Purge once
	// everything appended before the purge is durable and before the
	// purge's metadata batch is written. Tests use it to append at that
	// point deterministically (an append racing a purge).
	BeforePurgeCommit func(topic string, partition int)
	// Pebble, if set, may adjust the metadata store's options (for
	// instance to turn off automatic compactions in a simulator).
	Pebble func(*pebble.Options)
	// Rand is the source of topic ids (default crypto/rand.Reader). A
	// simulator passes a seeded one, so that a run replays exactly.
	Rand io.Reader
}

// ReadInfo describes a file read about to happen.
type ReadInfo struct {
	Topic     string
	Partition int
	File      string
	Pos       int64
	Len       int
}

func (o Options) withDefaults() (Options, error) {
	if o.FS == nil || o.Dir == "" {
		return o, fmt.Errorf("%w: Options.FS and Options.Dir are required", ErrInvalidConfig)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.TailCacheBytes == 0 {
		o.TailCacheBytes = DefaultTailCacheBytes
	}
	if o.ReaderPoolSize <= 0 {
		o.ReaderPoolSize = DefaultReaderPoolSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ReservationStep == 0 {
		o.ReservationStep = DefaultReservationStep
	}
	if o.MinReservationStep == 0 {
		o.MinReservationStep = DefaultMinReservation
	}
	o.MinReservationStep = min(o.MinReservationStep, o.ReservationStep)
	if o.ReservationTime <= 0 {
		o.ReservationTime = DefaultReservationTime
	}
	if o.IndexIntervalBytes <= 0 {
		o.IndexIntervalBytes = DefaultIndexInterval
	}
	if o.MaxClockStep <= 0 {
		o.MaxClockStep = DefaultMaxClockStep
	}
	if o.ReservedBytes == 0 {
		o.ReservedBytes = DefaultReservedBytes
	}
	return o, nil
}
