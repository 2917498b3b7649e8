// Package engine is Ledge's durable log: topics of partitions, each an
// append-only log of record batches (package record's format) in segment
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
// copies it into a staging chunk private to the pipeline if it is small
// (below 32 KiB) and returns at once; WaitDurable says when the topic's
// policy holds. One flusher goroutine per partition takes every queued
// batch and writes each staging chunk, and each large batch from its own
// slice, with one call at the log's logical end. The one exception: under
// interval and none, a small batch (below 8 KiB) appended while the
// pipeline is idle — nothing queued, nothing else pending — is written by
// its appender inside Append, holding the flusher's turn, with the very
// call the flusher would have made; a one-at-a-time producer so skips
// two goroutine hand-offs. Under DurabilityAlways it then fsyncs once for the whole
// round (group commit; after an fsync it waits briefly for the appenders
// it released, so that they share the next one); a round of 1 MiB or more
// hands its fsync to the partition's syncer goroutine instead, through
// another handle of the same file, and the flusher writes the next round
// while it runs. An fsync acknowledges only what was written before it
// began, so a round written during another's fsync waits for one of its
// own, and a failed fsync fails both. Under interval and none
// a syncer goroutine fsyncs in the background (interval: every
// SyncInterval, and when a segment is sealed, told at the end of the
// flusher's round; none: 30 s after a seal, or once 32 sealed segments
// wait, see syncer.go), so a write never waits for an fsync. Readers see a record once it is written
// (none, interval) or fsynced (always).
//
// A partition's file writes, file removals and its own metadata writes
// (reservations, checkpoints, cleanup records) are made by its flusher
// (or under its turn, as above), and its fsyncs by the flusher or the syncer, each handing work to the
// other: they happen in the partition's order, never two at once. A write
// may run while the syncer fsyncs (on another handle of the file), but
// fsyncs, index files and directory fsyncs are made by one sync at a time,
// so a seal and its directory fsync come after any fsync under way. A caller that lets the goroutines go idle between its calls (a
// simulator under testing/synctest) sees the same file operations in the
// same order every time.
//
// Segments are `<base offset>.log`; a new one starts where the previous
// ended, which lets recovery tell a sealed segment that lost its tail.
// A sealed segment gets an index file once it is fsynced. The active
// segment is sealed when the next batch would overflow SegmentBytes, at
// the next append once it is older than SegmentAge, and, when appends
// stopped, by EnforceRetention (below).
//
// Under interval and none, offsets are reserved durably ahead of use,
// recorded in pebble with one synced write, made by the flusher between
// rounds once half of the last raise is left (an append waits only if the
// reservation runs out). A raise covers about Options.ReservationTime
// (1 s) of the partition's appends at the rate since the previous one, at
// least MinReservationStep (1024) and at most ReservationStep (2^20).
// Under always nothing is reserved: a recovery never needs it (below).
//
// After an unclean stop, a topic under always continues numbering at the
// recovered end of its log: its readers saw only fsynced records, which
// recovery keeps, so the offsets handed out past the end were neither
// acknowledged nor seen, and none is skipped; the history epoch stays.
// Under interval and none readers may have seen offsets up to the
// reserved ceiling, so numbering continues there (an offset a reader or a
// producer saw never names another record), and the history epoch is
// bumped (a lossy-recovery transition records the end that was kept).
// The skipped range, at most about a second of appends, is recorded in
// the partition state (PartitionState.Gaps): it holds no record, and
// Skipped lets a lag leave it out. A clean Close records the exact next
// offset, so a clean restart neither skips offsets nor bumps the epoch.
//
// A failed fsync or write fails the partition (ErrPartitionFailed): the
// file is never fsynced again, unacknowledged appends fail, and the
// flusher records (one synced metadata write) that the log may not be
// trusted past its newest durable checkpoint. A restart then cuts the log
// exactly there, whatever the files hold: after a failed fsync the page
// cache may hold data the disk never got, which a restart without a power
// loss would still read and a later fsync would not make durable. For the
// same reason, whatever a recovery keeps past the durable checkpoint (when
// no such record could be written, or after any unclean stop) is written
// again before it is fsynced, the directory of every segment it keeps is
// fsynced, and what the metadata store replays from its WAL is durable
// before recovery acts on it (pebble's Open flushes it into a new table).
// A failed metadata write
// makes every later metadata read and write fail (ErrMetadataFailed): the
// store already shows the failed batch in memory. A full disk is different, an expected
// state and never a failure (space.go): the appends refused fail with
// ErrNoSpace (retryable), reads go on, the ballast file is released so
// that the metadata of purge, retention, deletion and commits has room,
// later appends are refused without writing until the disk has room
// again, and then resume by themselves. A seal on a full disk zeroes only
// bytes the segment file holds (no new room) and goes without an index
// file if there is no room for one; the metadata store's retries of a
// table it cannot write are paced and their log lines limited
// (metalog.go).
//
// # Purge, retention and topic deletion
//
// Each is a durable state machine (retention.go, topic.go): a synced
// metadata batch records the intent (the new start offset; for purge also
// the new history epoch, whose lineage transition is what invalidates
// every older bookmark; for deletion the removal of every key of the topic
// id), the operation is acknowledged only once it is durable, and the file
// cleanup comes after. The cleanup is recorded as done only once the
// files are removed and the directory fsync that makes the removal durable
// succeeded; PartitionState.CleanupPending shows an obligation still open.
// A failed directory fsync leaves the obligation pending and does not stop
// appends (the files concerned are never served). Open finishes every
// pending obligation before serving: it removes segment files that a power
// loss brought back below the start offset, fsyncs the directory, removes
// the directories of deleted topics (and of any topic id it does not
// know), and only then records them as done. Cleanup only ever removes
// files wholly below the durable start, so it never touches records
// appended after a purge, even those that share a segment with purged
// ones (an append racing the purge): recovery keeps the batches below the
// start as part of the file's structure and serves only those at or above
// it. Once a topic is deleted, its partitions refuse appends, reads and
// bookmark reads, and every metadata write of its keys (bookmarks, its
// spaces) fails, with ErrTopicDeleted: nothing of it is written after the
// deletion batch. A topic re-created under the same name has a new id, and
// every file and key of a topic contains its id.
//
// Retention deletes sealed segments only. So that retention by age reaches
// a partition that stopped receiving appends, EnforceRetention first seals
// an active segment that is due: older than SegmentAge, or (with
// RetentionAge) holding nothing appended within RetentionAge, both on the
// jump-free clock. It hands the roll to the flusher with a barrier (after
// whatever is queued) and waits until the sealed segment is fsynced and
// indexed, so the same call can delete it, and a caller (a test) that
// returns from it knows the seal is done: no waiting on timers.
//
// EnforceRetention takes a floor: it never deletes a segment holding an
// offset at or above it (an uplink that has not forwarded those records
// yet). RetentionResult says what the floor held back (the start
// retention alone would have set, the segments and bytes kept) and
// PartitionStats.RetentionHeld counts the calls it held back, so the node
// can make that visible; NoRetentionFloor holds nothing back.
//
// # Reads
//
// PlanRead resolves a read on the owner (from the tail cache, or a segment
// and a byte range, holding a reference); ReadPlan.Execute reads anywhere,
// on a bounded reader pool, with positional reads, and returns whole stored
// batches in a buffer nobody else holds (ReadResult.Release may give it
// back for reuse; ExecuteInto reads into the caller's buffer). Batches from
// the tail cache are the appended slices themselves: zero copy, never
// modified. The tail cache fills only while a consumer reads at the tail
// (a read that reaches the high watermark, or one it serves, in the last
// five seconds); otherwise AppendOwned hands each batch back to its caller
// once written, so a node reuses the memory of its produce requests.
// Partition.DropTailCache sends reads to the files. A large read (a
// replay's poll of several MiB) that stops inside a segment reads ahead
// what follows, which the partition's next read from there takes instead
// of reading; at most one read ahead per partition, dropped unless taken
// within 500 ms.
//
// # Test hooks
//
// Options.BeforeRead suspends a read at its file read;
// Options.BeforePurgeCommit runs between a purge's barrier and its
// metadata batch (an append racing the purge); Options.Pebble adjusts the
// metadata store's options (a simulator turns automatic compactions off);
// Options.Rand replaces crypto/rand as the source of topic ids.
//
// # Metadata
//
// Topic records, partition states (start, epoch, lineage, reservation
// ceiling, durable checkpoint, skipped ranges), producer-state snapshots, bookmarks and the
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
// RATIONALE.md holds the decisions a reader would question — offsets
// reserved ahead by the append rate, numbering after a crash by durability, the appender's copy into staging chunks, the inline
// write of a lone append, group commit's wait for the appenders it
// released, a big round's fsync overlapping the next round's writes (and
// why the segment is not preallocated), the syncer's deferred fsyncs, an append that allocates
// nothing, the tail cache's warmth, read-ahead, retention by a jump-free
// clock — each with the measurement that settled it.
//
// # Known limits
//
// An unclean restart under interval and none skips the offsets reserved
// beyond the recovered end and bumps the history epoch whenever offsets
// were reserved there since numbering last resumed, even if none of them
// was handed out: the engine cannot tell, and a needless bump only costs
// consumers one "refresh position". A partition records at most 64
// skipped ranges (the oldest are dropped, and counted as records again
// by a lag that reaches that far back). Offsets refused for a full disk
// are not recorded as skipped.
// If the metadata store has failed too when a segment's fsync fails, the
// durable end cannot be recorded: the next recovery keeps what the files
// hold (made durable), so appends that were refused may come back. A
// failed directory fsync is taken to leave that directory's earlier
// changes not durable until the next Open, but later fsyncs of the
// directory (for new segment files) are trusted for their own changes. A
// metadata failure (a failed WAL write or sync) is fatal for the metadata
// store until a restart.
package engine
