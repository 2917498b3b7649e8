// Package engine is Ledge's durable log: topics of partitions, each an
// append-only log of record batches (transport/wire's format) in segment
// files, with sparse indexes, durability policies with group commit,
// retention, purge, recovery, and the node's metadata in pebble. Every
// file operation goes through a pebble vfs.FS, so tests can crash the
// "disk" (vfs.NewCrashableMem, CrashClone) or fail a chosen call
// (vfs/errorfs).
//
// It is not the place for fencing rules, consumers, groups or networks:
// the partition owner in node orders calls to a Partition and decides what
// they mean. The engine gives it durable, never-reused offsets, history
// epochs with their lineage, producer state, and an ordered metadata store.
//
// # Appends and durability
//
// Append validates a batch, assigns offsets under the partition lock,
// copies it into a staging chunk private to the pipeline and returns at
// once; WaitDurable says when the topic's policy holds. One flusher
// goroutine per partition, the only writer of its files, takes every
// queued batch and writes each staging chunk with one call at the log's
// logical end. Under DurabilityAlways it then fsyncs once for the whole
// round (group commit; after an fsync it waits briefly for the appenders
// it released, so that they share the next one). Under interval and none
// a syncer goroutine fsyncs in the background (every SyncInterval, and
// when a segment is sealed), so a write never waits for an fsync. Readers
// see a record once it is written (none, interval) or fsynced (always).
//
// Segments are `<base offset>.log`; a new one starts where the previous
// ended, which lets recovery tell a sealed segment that lost its tail.
// A sealed segment gets an index file once it is fsynced.
//
// Offsets are reserved durably ahead of use, in steps of
// Options.ReservationStep recorded in pebble with one synced write, started
// in the background when half a step is used. A recovery after an unclean
// stop continues numbering at the reserved ceiling, so an offset is never
// handed out twice, and under interval and none bumps the history epoch
// (a lossy-recovery transition records the end that was kept). A clean
// Close records the exact next offset instead, so a clean restart neither
// skips offsets nor bumps the epoch.
//
// A failed fsync or write fails the partition (ErrPartitionFailed): the
// file is never fsynced again, unacknowledged appends fail, and a restart
// recovers what is durable. A full disk is different: the appends refused
// fail with ErrNoSpace (retryable), reads go on, and a ballast file is
// released so that retention and purge keep room for their metadata.
//
// # Reads
//
// PlanRead resolves a read on the owner (from the tail cache, or a segment
// and a byte range, holding a reference); ReadPlan.Execute reads anywhere,
// on a bounded reader pool, with positional reads, and returns whole stored
// batches in a buffer nobody else holds (ReadResult.Release may give it
// back for reuse; ExecuteInto reads into the caller's buffer). Batches from
// the tail cache are the appended slices themselves: zero copy, never
// modified. Options.BeforeRead lets tests suspend a read at the file read;
// Partition.DropTailCache sends reads to the files.
//
// # Metadata
//
// Topic records, partition states (start, epoch, lineage, reservation
// ceiling, durable checkpoint), producer-state snapshots, bookmarks and the
// owners' key spaces live in pebble under a versioned schema (see
// metakeys.go); every value carries magic, version, length and CRC32C, and
// a value or schema from a newer version is refused with
// ErrUnsupportedFormat. MetaBatch commits without an fsync in the owner's
// order; SyncMeta coalesces the fsyncs.
//
// # API notes
//
// Purge first makes everything appended before it durable, then sets the
// start to that point (the high watermark at that moment). Append requires
// a producer's batch to be dense (recordCount = lastOffsetDelta + 1).
// Beside appends, reads and purge, a Partition offers OffsetForTime,
// ProducerState, bookmarks, Stats and DropTailCache; ReadPlan.ExecuteInto
// and ReadResult.Release let a caller reuse read memory; MetaBatch,
// PutMeta, GetMeta, ScanMeta and SyncMeta are the owners' metadata store.
//
// # Rationale
//
// Retention by age uses a jump-free clock (Options.MaxClockStep) rather
// than record timestamps: producer clocks at the edge start in 1970 and
// jump when NTP corrects them, and neither a producer's clock nor the
// node's may make data look old. The time index uses record timestamps,
// kept monotone by taking the maximum so far.
//
// The reservation ceiling costs one synced pebble write per
// ReservationStep offsets (~130 µs here), instead of one per batch.
//
// The copy into the staging chunk is made by the appender rather than the
// flusher: the flusher's cost per byte is then the write alone, and the
// copy runs in parallel on another core (measured: policy none went from
// about 50% to about 70% of a raw sequential write on this 2-core machine).
// Sealed segments are fsynced by the syncer, not the flusher: a 64 MiB
// fdatasync stalled appends for ~60 ms.
//
// Metadata fsyncs are not folded into segment fsyncs: the owners' metadata
// (bookmarks, sessions) is committed without an fsync and made durable by
// SyncMeta, whose one WAL sync covers every earlier commit of every
// partition.
package engine
