package sdk

import (
	"time"

	"github.com/ledgemq/ledge/fence"
)

// Producer defaults.
const (
	// DefaultMaxBatchRecords is how many records a batch holds at most.
	DefaultMaxBatchRecords = 100
	// DefaultMaxBatchBytes bounds a batch's uncompressed size.
	DefaultMaxBatchBytes = 1 << 20
	// DefaultMaxInFlight is how many records of one partition may be sent
	// and not yet acknowledged.
	DefaultMaxInFlight = 500
	// DefaultMaxInFlightBytes is how many bytes of batches of one
	// partition may be sent and not yet acknowledged.
	DefaultMaxInFlightBytes = 8 << 20
	// DefaultMaxBufferedRecords is how many records a producer holds, sent
	// or not, before Produce waits.
	DefaultMaxBufferedRecords = 10000
	// DefaultDeliveryTimeout is how long a record may wait for its
	// acknowledgement, retries included.
	DefaultDeliveryTimeout = 2 * time.Minute
	// DefaultRetryBackoff is the first wait before a retry; it doubles up
	// to MaxRetryBackoff.
	DefaultRetryBackoff = 10 * time.Millisecond
	// MaxRetryBackoff is the longest wait between two retries.
	MaxRetryBackoff = time.Second
)

// ProducerOption configures a Producer (see Client.NewProducer).
type ProducerOption interface{ applyProducer(*producerConfig) }

type producerOption func(*producerConfig)

func (f producerOption) applyProducer(c *producerConfig) { f(c) }

type producerConfig struct {
	linger          time.Duration
	maxBatchRecords int
	maxBatchBytes   int
	maxInFlight     int
	maxInFlightB    int
	maxRecordBytes  int // the largest record batch the topic takes: a record alone may fill it
	maxBuffered     int
	compression     Compression
	compressionSet  bool
	idempotent      bool
	partitioner     Partitioner
	deliveryTimeout time.Duration
	retryBackoff    time.Duration
	onBusy          func(retryAfter time.Duration) // WithOnBusy
}

func defaultProducerConfig() producerConfig {
	return producerConfig{
		maxBatchRecords: DefaultMaxBatchRecords,
		maxBatchBytes:   DefaultMaxBatchBytes,
		maxInFlight:     DefaultMaxInFlight,
		maxInFlightB:    DefaultMaxInFlightBytes,
		maxBuffered:     DefaultMaxBufferedRecords,
		idempotent:      true,
		deliveryTimeout: DefaultDeliveryTimeout,
		retryBackoff:    DefaultRetryBackoff,
	}
}

// maxInFlightBatches is how many batches of one partition may be in
// flight: the node remembers the latest fence.ProducerWindow batches of a
// producer, so a retry of any batch in flight is recognized as one.
const maxInFlightBatches = fence.ProducerWindow

// WithLinger holds a batch that is not full for up to d before sending it,
// waiting for more records.
//
// Default 0: a batch leaves as soon as the partition's in-flight window
// has room. Records that arrive while the window is full are batched
// anyway, so a busy producer fills its batches without a linger; a linger
// helps only a producer that sends in trickles and wants fewer, larger
// requests. Flush and Close send at once, whatever the linger.
func WithLinger(d time.Duration) ProducerOption {
	return producerOption(func(c *producerConfig) { c.linger = max(d, 0) })
}

// WithMaxBatchRecords bounds the records in one batch.
//
// Default 100. Values below 1 keep the default. A batch is also bounded by
// WithMaxBatchBytes and by the in-flight window.
func WithMaxBatchRecords(n int) ProducerOption {
	return producerOption(func(c *producerConfig) {
		if n > 0 {
			c.maxBatchRecords = n
		}
	})
}

// WithMaxBatchBytes bounds a batch's uncompressed size in bytes, header
// included.
//
// Default 1 MiB; lowered to the topic's MaxBatchBytes and to the node's
// frame limit when those are smaller. Values below 1 KiB keep the
// default. A single record larger than the bound goes alone in a batch of
// its own; only one larger than the topic's MaxBatchBytes (default 4 MiB)
// or the node's frame limit fails, with ErrMessageTooLarge.
func WithMaxBatchBytes(n int) ProducerOption {
	return producerOption(func(c *producerConfig) {
		if n >= 1<<10 {
			c.maxBatchBytes = n
		}
	})
}

// WithMaxInFlight bounds the records of one partition that are sent and
// not yet acknowledged; the producer pipelines batches on the partition's
// stream up to it.
//
// Default 500 records, and never more than 8 batches (fence.ProducerWindow:
// the node recognizes a retry of any of its producer's latest 8 batches).
// Values below 1 keep the default. One batch is always allowed, however
// large.
func WithMaxInFlight(records int) ProducerOption {
	return producerOption(func(c *producerConfig) {
		if records > 0 {
			c.maxInFlight = records
		}
	})
}

// WithMaxInFlightBytes bounds the bytes of one partition's batches that
// are sent and not yet acknowledged, headers included: a batch leaves
// only when it fits whole beside those in flight. Records are counted
// by WithMaxInFlight, bytes by this; whichever fills first holds the next
// batch back, so big records are bounded by bytes and small ones by
// count.
//
// Default 8 MiB: eight batches of the default 1 MiB, and no more than the
// node's stream receive window grows to, so a window full of requests
// never waits on QUIC flow control as well as on the node's replies.
// Values below 64 KiB keep the default. One batch is always allowed,
// however large.
func WithMaxInFlightBytes(n int) ProducerOption {
	return producerOption(func(c *producerConfig) {
		if n >= 64<<10 {
			c.maxInFlightB = n
		}
	})
}

// WithMaxBufferedRecords bounds the records a producer holds — waiting
// for a batch, in flight, or waiting for a retry. Produce waits for room
// past it (until its context ends).
//
// Default 10000. Values below 1 keep the default.
func WithMaxBufferedRecords(n int) ProducerOption {
	return producerOption(func(c *producerConfig) {
		if n > 0 {
			c.maxBuffered = n
		}
	})
}

// WithCompression compresses batches with c (CompressionNone, S2 or
// Zstd). A batch that does not shrink is sent uncompressed.
//
// Default: the topic's Compression.
func WithCompression(c Compression) ProducerOption {
	return producerOption(func(cfg *producerConfig) { cfg.compression, cfg.compressionSet = c, true })
}

// WithIdempotence turns the idempotent producer on or off. On, the
// producer registers a producer id and numbers each partition's batches,
// so a retry is never appended twice and never reorders a partition.
// Off, batches carry no producer id: a retry after a lost reply may
// append a batch twice, and to keep the partition's order the producer
// keeps only one batch in flight per partition.
//
// Default on.
func WithIdempotence(on bool) ProducerOption {
	return producerOption(func(c *producerConfig) { c.idempotent = on })
}

// WithPartitioner chooses records' partitions.
//
// Default KeyHashPartitioner with the batch size as its stickiness: keyed
// records by murmur2 of the key, keyless ones batch by batch round-robin.
// A nil p keeps the default.
func WithPartitioner(p Partitioner) ProducerOption {
	return producerOption(func(c *producerConfig) {
		if p != nil {
			c.partitioner = p
		}
	})
}

// WithDeliveryTimeout bounds how long a record may wait for its
// acknowledgement after Produce accepted it, retries included. A record
// past it fails with an error matching ErrDeliveryTimeout, which also
// says whether the record may have been written.
//
// Default 2 minutes. Zero or negative keeps the default. Retries of
// retryable errors (busy, full disk, a lost connection) go on until then,
// with a backoff from 10 ms doubling to 1 s.
func WithDeliveryTimeout(d time.Duration) ProducerOption {
	return producerOption(func(c *producerConfig) {
		if d > 0 {
			c.deliveryTimeout = d
		}
	})
}

// WithRetryBackoff sets the first wait before a retry; later waits double
// up to one second.
//
// Default 10 ms. Zero or negative keeps the default.
func WithRetryBackoff(d time.Duration) ProducerOption {
	return producerOption(func(c *producerConfig) {
		if d > 0 {
			c.retryBackoff = d
		}
	})
}
