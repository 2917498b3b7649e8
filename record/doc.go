// Package record is Ledge's record batch: the format a producer sends, the
// engine stores and an unfiltered consumer receives byte for byte. It holds
// the batch header (BatchHeader, ParseBatchHeader), its verification
// (VerifyBatch: magic, version, length, CRC32C), the stamps the engine
// writes at append (StampBaseOffset, StampAppendTime), the compression
// codecs of the records section (s2 and zstd), a BatchBuilder that
// assembles a batch and a RecordIterator that walks one.
//
// It is a format, nothing more: no files, no frames, no sockets, no state
// beyond the process-wide zstd coders. It sits below everything that
// handles batches — the engine, the plugin host, the protocol in
// transport/wire, the SDK — and imports nothing of Ledge's, so the engine
// and the plugin host need not link the protocol to read what they store.
// docs/PROTOCOL.md section 10 is the specification.
//
// # Rationale
//
// One format from producer to disk to consumer: the node verifies a
// produced batch and stamps its base offset (outside the CRC) without
// re-encoding it, and a poll reply is the stored bytes. A node-built batch
// (a filtered reply) is the one exception, and BatchBuilder.AppendWithOffset
// builds it with gaps in its offsets.
//
// The iterator never allocates more than a batch's declared uncompressed
// size, bounded by the limit its caller gives, whatever the bytes claim:
// batches arrive from the network and from disks that may have been torn.
package record
