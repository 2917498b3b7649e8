package sdk

import (
	"time"

	"github.com/ledgemq/ledge/record"
)

// Header is one record header. A nil Value is null.
type Header = record.Header

// Record is a message: what a producer sends and a consumer receives.
type Record struct {
	// Topic is the record's topic. The producer fills it in; a consumer
	// sets it on what it returns.
	Topic string
	// Partition is the record's partition. The producer sets it from its
	// partitioner (ManualPartitioner reads it instead); a consumer sets it
	// on what it returns.
	Partition int32
	// Offset is the record's position in its partition: set by the
	// producer once the record is acknowledged, and on consumed records.
	Offset uint64
	// Timestamp is the record's time. Produce sets the zero value to the
	// current time; a topic with append-time timestamps replaces it with
	// the node's clock (the producer's callback sees the node's time).
	Timestamp time.Time
	// Key selects the partition under the default partitioner. Nil is
	// null (no key), distinct from an empty key.
	Key []byte
	// Value is the payload. Nil is null.
	Value []byte
	// Headers are the record's headers, in order.
	Headers []Header

	// poll is the poll a consumed record came from: its fence token is
	// what a commit through the record carries.
	poll *pollPartition
}

// size estimates the record's encoded size in a batch, for batching
// limits.
func (r *Record) size() int {
	n := len(r.Key) + len(r.Value) + 16
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value) + 6
	}
	return n
}

func (r *Record) wire() record.Record {
	return record.Record{Timestamp: r.Timestamp.UnixMilli(), Key: r.Key, Value: r.Value, Headers: r.Headers}
}
