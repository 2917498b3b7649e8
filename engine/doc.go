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
// Append validates a batch, assigns offsets under the partition lock and
// returns at once; WaitDurable says when the topic's policy holds. One
// flusher goroutine per partition takes every queued batch, copies them
// into its own buffer, writes them with one call and, under
// DurabilityAlways, fsyncs once for all of them (group commit). Readers see
// a record once it is written (none, interval) or fsynced (always).
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
// batches in a buffer nobody else holds. Options.BeforeRead lets tests
// suspend a read at the file read; Partition.DropTailCache sends reads to
// the files.
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
// # Departures from the working API
//
// ReadPlan.Execute takes a context. Purge first makes everything appended
// before it durable, then sets the start to that point (the high watermark
// at that moment). Append requires a producer's batch to be dense
// (recordCount = lastOffsetDelta + 1). Added: Partition.OffsetForTime,
// ProducerState, ProducerIDs, Bookmarks, DropTailCache, Space, and the
// MetaBatch API; Options.BeforeRead, ReservationStep, IndexIntervalBytes,
// MaxClockStep, ReservedBytes and Pebble.
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
package engine
