// Package sdk is the Go client of a Ledge node: a Client dials the node
// over QUIC (TLS 1.3), a Producer writes records, a Consumer reads them,
// and the Client's admin methods manage topics and tokens.
//
// It talks to a node only through the wire protocol (transport/wire over
// transport/quic); it never imports the node or the storage engine.
//
// # Connecting
//
// Dial needs an address and credentials. Run beside a node — in the
// directory that holds its ledge-data, or with LEDGE_DATA_DIR naming it —
// it needs neither: a running node records where it listens in its data
// directory (listen.json) and keeps its CA certificate and admin token
// there, where Dial looks (WithDataDir). Elsewhere, pass the address (or
// set LEDGE_SERVER, as for the ledge CLI), WithCAFile and WithToken. A node
// Dial cannot reach is a *DialError matching ErrNodeUnreachable, naming
// the address and where it came from. Options follow one pattern: each
// says its default, its unit and what happens at the edges.
//
// # Producing
//
// A Producer batches records per partition and sends each partition's
// batches on its own ordered QUIC stream, several in flight at once
// (WithMaxInFlight counts their records, WithMaxInFlightBytes their
// bytes: big records are bounded by bytes, and a record larger than a
// batch goes alone). It is idempotent by default: it registers a producer
// id with the node, and every batch carries that id and a sequence number
// per partition. A batch whose reply was lost is sent again with the same
// numbers, and the node answers a batch it already appended with the
// offsets it gave it the first time — so retries never duplicate a record
// and never reorder a partition. Produce is asynchronous, with a callback
// per record; ProduceSync waits; Flush waits for everything produced.
//
// A record fails only when sending again cannot help (the node refused its
// batch: too large, forbidden, unknown topic), when it outlives
// WithDeliveryTimeout, or when its outcome can no longer be learned: a
// reply was lost and then the node forgot the producer, or the delivery
// timeout passed. Only that last kind, ErrUnknownOutcome, may have been
// written although its callback got an error; every other failure was not
// written. A connection that stops answering is dropped after
// WithRequestTimeout and dialed again, so a node that crashed and came
// back is found without waiting for QUIC's idle timeout.
//
// A Producer writes to one topic. The producer id and epoch are
// node-wide, but everything else a producer keeps is the topic's: its
// partition count (for the partitioner), its topic id (a producer of a
// topic deleted and created again under the name fails with
// ErrTopicRecreated rather than write into the new one), one ordered
// stream and one sequence per partition, and the in-flight window of
// each. Binding them to one topic keeps that state small and each
// failure local to the topic it concerns. A program writing to several
// topics opens one Producer per topic on one Client: they share its
// connection, and each costs a few hundred bytes besides its buffers.
//
// Records with a key go to murmur2(key) mod partitions — the same hash and
// arithmetic as Kafka's default partitioner, so keyed records land on the
// same partition numbers a Kafka topic would give them. Records without a
// key fill one partition's batch before moving to the next. See
// KeyHashPartitioner, ManualPartitioner and RoundRobinPartitioner.
//
// # Consuming
//
// A Consumer long-polls all its partitions in one request: the node
// answers as soon as any has records, or after WithMaxWait with none. An
// anonymous consumer reads by position (Seek, WithStart). A named consumer
// (WithConsumerName) keeps committed positions on the node and resumes from
// them; attaching under a name starts a session that fences every earlier
// process under the name, whose polls and commits then fail with
// ErrFencedSession.
//
// A consumer of one key (WithKey, WithKeyPrefix) receives only that key's
// records: the commands of one device on a topic all devices share. The
// node parks its poll by the key and wakes it only for a record of that
// key, so the poll costs the same however many devices share the
// partition; its position still moves past the other keys' records.
//
// Every poll carries a fence token per partition: the identity of the
// partition's history, the consumer's session and the range the poll
// delivered. Each returned record remembers its poll, and Commit through a
// record carries that poll's token, so the node refuses a commit made in
// another world — after a purge (ErrStaleHistory), or by a fenced process —
// even when its offset would be valid now. Automatic commits
// (WithAutoCommit) are fenced the same way, on the node.
//
// The keys, values and headers of a poll's records are slices of the
// reply the transport read: Poll decodes without copying. A consumer done
// with a poll's records may hand them back (Recycle), and later polls are
// read and decoded into the same memory instead of fresh, zeroed memory
// for the collector; a replay at hundreds of MB/s spends several percent
// of its processor less.
//
// # Errors
//
// A refused request is an *Error with a wire status; errors.Is matches it
// against the sdk.ErrX constants (which are wire statuses) and, for fence
// rejections, against the fence package's sentinels. IsRetryable says
// whether sending again can succeed, and Status.RetryClass what to do:
// retry, refresh the position, reinitialize, rejoin the group, or give
// up. The consumer-group fences (ErrUnknownMember, ErrFencedMember,
// ErrStaleMemberEpoch, ErrUnassignedPartition) are handled by the
// GroupConsumer itself; their comments say what an application sees.
//
// Poll, of a Consumer or a GroupConsumer, may return records and an error
// together: a poll covers several partitions, and one failing does not
// take the others' records away. Handle the records first, then the
// error (the Consumer.Commit example does).
//
// # Closing
//
// Producer.Close and Consumer.Close take a context because they wait: a
// producer flushes what is in flight, a consumer commits what its
// automatic commit owes. Client.Close does not wait for anything — it
// closes the connection at once — so it takes none; close the producers
// and consumers first, with the context that bounds their work.
//
// # Rationale
//
// One stream per partition, not one per request: a stream keeps the
// partition's order without sequencing above the transport, and QUIC
// streams do not block each other, so a slow partition or a parked long
// poll never holds up another. The in-flight window is bounded by
// fence.ProducerWindow batches as well as by records, because the node
// remembers that many of a producer's latest batches per partition: any
// batch still unanswered can then be recognized as a retry.
//
// The client's own calls (admin requests, InitProducer, attaching a
// consumer, commits, group calls) share one control stream, pipelined,
// open only while a call is in flight: the last call to finish closes it
// and the next opens another. An open stream costs the node a reader
// goroutine for as long as it lasts, and opening one costs no round trip,
// so an idle client (a device between two records, its poll parked)
// holds only its producers' and consumers' streams.
package sdk
