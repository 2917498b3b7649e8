package engine

import (
	"errors"
	"fmt"
)

// Errors of the engine. Each says whether to retry: see Retryable.
var (
	// ErrUnknownTopic: no topic of that name (give up or create it).
	ErrUnknownTopic = errors.New("engine: unknown topic")
	// ErrTopicExists: CreateTopic of a name in use (give up).
	ErrTopicExists = errors.New("engine: topic exists")
	// ErrTopicDeleted: the topic was deleted while the call was pending
	// (refresh: a topic of the same name is a different topic).
	ErrTopicDeleted = errors.New("engine: topic deleted")
	// ErrUnknownPartition: the partition index is out of range (give up).
	ErrUnknownPartition = errors.New("engine: unknown partition")
	// ErrInvalidConfig: a TopicConfig or Options value is out of range.
	ErrInvalidConfig = errors.New("engine: invalid configuration")
	// ErrInvalidBatch: an appended batch is malformed (it also matches the
	// record package's error that says how). Retrying the same bytes fails again.
	ErrInvalidBatch = errors.New("engine: invalid batch")
	// ErrNoSpace: the disk is full. The append was refused; earlier data
	// stays readable and retention and purge keep running. Retry once space
	// is freed.
	ErrNoSpace = errors.New("engine: no space left on device (retry once space is freed)")
	// ErrPartitionFailed: an fsync or write of the partition failed. The
	// engine never retries an fsync on a file whose fsync failed; the
	// partition refuses appends and unacknowledged appends fail with this
	// error. Restart the node: recovery keeps exactly what was durable.
	ErrPartitionFailed = errors.New("engine: partition failed; restart the node to recover what is durable")
	// ErrMetadataFailed: the metadata store failed to write or sync.
	// Every later metadata write and read fails with it (the store's
	// memory may hold changes that are not durable). Restart the node.
	ErrMetadataFailed = errors.New("engine: metadata store failed; restart the node")
	// ErrClosed: the engine is closed (or closing).
	ErrClosed = errors.New("engine: closed")
	// ErrUnsupportedFormat: a file or metadata value was written by a newer
	// version of the engine; upgrade the binary (do not downgrade data).
	ErrUnsupportedFormat = errors.New("engine: data written by a newer version; upgrade ledge")
	// ErrReleased: a ReadPlan was executed after Release.
	ErrReleased = errors.New("engine: read plan released")
)

// OutOfRangeError: a read asked for an offset outside [Start, HW]. A
// consumer below Start lost records to retention or purge and resumes at
// Start (or by its reset policy); one above HW asked for the future.
type OutOfRangeError struct {
	Offset, Start, HW uint64
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("engine: offset %d out of range [%d, %d]", e.Offset, e.Start, e.HW)
}

// CorruptLogError: the durable part of a partition's log is corrupt. The
// engine refuses to serve the partition rather than serve a log with a
// hole. Restore the file from a backup, or remove the partition's data.
type CorruptLogError struct {
	File   string
	Pos    int64
	Reason string
}

func (e *CorruptLogError) Error() string {
	return fmt.Sprintf("engine: corrupt log %s at byte %d: %s (the partition is not served)", e.File, e.Pos, e.Reason)
}

// Retryable reports whether an operation that failed with err may succeed
// when retried as is, without a restart: a full disk (once space is freed).
func Retryable(err error) bool {
	return errors.Is(err, ErrNoSpace)
}

// failedError wraps a cause in ErrPartitionFailed.
type failedError struct{ cause error }

func (e *failedError) Error() string {
	return ErrPartitionFailed.Error() + ": " + e.cause.Error()
}

func (e *failedError) Unwrap() []error { return []error{ErrPartitionFailed, e.cause} }

func partitionFailed(cause error) error {
	var fe *failedError
	if errors.As(cause, &fe) {
		return cause
	}
	return &failedError{cause: cause}
}
