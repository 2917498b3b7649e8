package uplink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An uplink forwards one Ledge partition to a Kafka topic, exactly once.
//
// Each forwarding step is one Kafka transaction: the records read from the
// partition and the forwarding position (the next Ledge offset) are written
// together, the position as a transactional offset commit (TxnOffsetCommit,
// the KIP-447 pattern) of a consumer group named like the transactional id.
// Records and position commit or abort together, so the position read back
// from Kafka after any crash is exactly where the committed records end.
//
// The transactional id is derived from the node id, the topic id and the
// partition: a second forwarder for the same partition (a restored backup of
// the node, a stuck old process) initializes the same transactional id,
// which bumps the producer epoch in Kafka and fences the older one. A
// re-created topic has a new topic id, hence a new transactional id and a
// new, empty position.
//
// The forwarder reads through the partition owner's poll API, as an
// anonymous consumer polling from an explicit offset: every poll is
// validated at its completion (a read planned before a purge and completed
// after it is refused), and the authoritative position lives in Kafka only,
// so there is no second copy in a Ledge bookmark that could disagree with it.

// Partitioning says how Ledge partitions map to Kafka partitions.
type Partitioning uint8

const (
	// SamePartition writes Ledge partition i to Kafka partition i
	// (the default). The Kafka topic needs at least as many partitions;
	// per-partition order is kept end to end.
	SamePartition Partitioning = iota
	// ByKey lets Kafka's key hash choose the partition: order is
	// kept per key. Records without a key are spread.
	ByKey
)

// String returns "same" or "key".
func (p Partitioning) String() string {
	if p == ByKey {
		return "key"
	}
	return "same"
}

// ParsePartitioning parses "same" or "key".
func ParsePartitioning(s string) (Partitioning, error) {
	switch s {
	case "", "same":
		return SamePartition, nil
	case "key":
		return ByKey, nil
	}
	return 0, fmt.Errorf("uplink: partitioning %q: want same or key", s)
}

// Overflow says what retention does with records not yet forwarded.
type Overflow uint8

const (
	// Block (the default): retention never deletes a record the
	// uplink has not forwarded; the partition grows while Kafka is away.
	Block Overflow = iota
	// DropOldest: retention runs as configured; records it deletes
	// before they were forwarded are skipped, counted (Dropped) and logged.
	DropOldest
)

// String returns "block" or "drop-oldest".
func (o Overflow) String() string {
	if o == DropOldest {
		return "drop-oldest"
	}
	return "block"
}

// ParseOverflow parses "block" or "drop-oldest".
func ParseOverflow(s string) (Overflow, error) {
	switch s {
	case "", "block":
		return Block, nil
	case "drop-oldest":
		return DropOldest, nil
	}
	return 0, fmt.Errorf("uplink: overflow %q: want block or drop-oldest", s)
}

// Source is the partition a forwarder reads: *Owner implements it.
type Source interface {
	Poll(ctx context.Context, req owner.PollRequest) (owner.PollResult, error)
	State() owner.PartitionState
	// Lineage is how each history epoch of the partition began, ending
	// with the current one: a position committed in an earlier history is
	// resolved through it.
	Lineage() []fence.HistoryTransition
}

// Config configures the forwarder of one partition.
type Config struct {
	// NodeID, TopicID and Partition name the transactional id; they must
	// be stable across restarts of the node (and equal on a restored
	// backup, which is then fenced).
	NodeID    string
	TopicID   fence.TopicID
	Partition uint32
	// Topic is the Ledge topic name, for logs.
	Topic string
	// Source is the partition's owner.
	Source Source

	// Seeds are Kafka bootstrap brokers, host:port.
	Seeds []string
	// To is the Kafka topic. It must exist.
	To           string
	Partitioning Partitioning
	Overflow     Overflow
	// KafkaOpts are extra client options: TLS (kgo.DialTLSConfig), SASL
	// (kgo.SASL), compression (default snappy), linger. The transactional
	// and partitioner options are set by the forwarder and override these.
	KafkaOpts []kgo.Opt

	// MaxTxnBytes bounds the Ledge bytes read into one transaction.
	// Default 4 MiB.
	MaxTxnBytes int
	// PollWait is how long one step waits for new records when caught up.
	// Default 1s.
	PollWait time.Duration
	// StepTimeout bounds one step's Kafka work (connect, or one
	// transaction): an outage turns into a failed step (status backoff, a
	// fresh client afterwards) rather than a call waiting for hours.
	// Default 30s.
	StepTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait after a failed step; it
	// doubles per consecutive failure. Defaults 100ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// Wait sleeps between retries; default a timer honouring ctx. Tests
	// inject it.
	Wait func(ctx context.Context, d time.Duration) error
	// Now is the clock for the lag's age. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger

	// beforeCommit, when set, runs after the records and the position are
	// in the transaction and before it is committed; an error abandons the
	// transaction as a crash would (no abort).
	beforeCommit func() error
}

func (c Config) withDefaults() Config {
	if c.MaxTxnBytes <= 0 {
		c.MaxTxnBytes = 4 << 20
	}
	if c.PollWait <= 0 {
		c.PollWait = time.Second
	}
	if c.StepTimeout <= 0 {
		c.StepTimeout = 30 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(30*time.Second, c.MinBackoff)
	}
	if c.Wait == nil {
		c.Wait = sleepCtx
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TransactionalID is the Kafka transactional id (and the name of the
// consumer group holding the position) of a partition's forwarder.
func TransactionalID(nodeID string, topic fence.TopicID, partition uint32) string {
	return "ledge-uplink." + nodeID + "." + topic.String() + "." + strconv.FormatUint(uint64(partition), 10)
}

// ErrFenced: another forwarder initialized the same transactional id
// with a newer producer epoch. Do not retry: the newer forwarder owns the
// partition's uplink.
var ErrFenced = errors.New("uplink: fenced by a newer forwarder with the same transactional id")

// ErrConfig: the uplink's configuration cannot work (no seeds, no
// target topic, the target topic is missing or has too few partitions for
// "same" partitioning). Fix the configuration; retrying does not help,
// except for a target topic that is created later.
var ErrConfig = errors.New("uplink: configuration")

// State is a forwarder's phase.
type State uint8

const (
	Connecting State = iota // initializing the producer, reading the position
	Forwarding              // connected; forwarding or caught up
	Backoff                 // waiting after a failure (Kafka unreachable, ...)
	Fenced                  // fenced by a newer forwarder: stopped for good
	Stopped                 // Run returned
)

// String names the state.
func (s State) String() string {
	switch s {
	case Connecting:
		return "connecting"
	case Forwarding:
		return "forwarding"
	case Backoff:
		return "backoff"
	case Fenced:
		return "fenced"
	}
	return "stopped"
}

// Status is what metrics, `ledge uplink status` and the status page
// show of a forwarder.
type Status struct {
	TransactionalID string
	State           State
	// Position is the next Ledge offset to forward (committed in Kafka);
	// valid once Known.
	Position uint64
	Known    bool
	// HighWatermark is the partition's as last seen.
	HighWatermark uint64
	// LagRecords is HighWatermark - Position, less the offsets a recovery
	// skipped (they hold no record; other gaps count); until the position
	// is known, from the log start: an upper bound. It is read from the
	// partition at every Status call.
	LagRecords uint64
	// LagAge is how old the oldest record not yet forwarded is; 0 when
	// caught up or unknown.
	LagAge time.Duration
	// Forwarded counts records committed to Kafka by this forwarder;
	// Transactions its committed transactions.
	Forwarded, Transactions uint64
	// Dropped counts records skipped because they were gone from the
	// partition before they were forwarded (retention under drop-oldest,
	// or a purge).
	Dropped uint64
	// Failures counts failed steps; LastError is the latest failure.
	Failures  uint64
	LastError string

	// Overflow is the uplink's retention policy.
	Overflow Overflow
	// FailingSince is when the current run of failed steps began (Kafka
	// unreachable, transactions refused); zero once Kafka answers again.
	FailingSince time.Time
	// Backoff is the wait in progress after the latest failure and RetryAt
	// its end; zero unless State is Backoff.
	Backoff time.Duration
	RetryAt time.Time
	// HeldBack is how many records retention, at its latest run, kept only
	// because they were not forwarded yet (block): the partition is over
	// its retention limits by that much. 0 when nothing was held back.
	HeldBack uint64
	// HeldBackAt is when the forwarder first saw the latest run that held
	// records back (zero: none seen since it started).
	HeldBackAt time.Time
}

// uplinkStats is the forwarder's status under a mutex.
type uplinkStats struct {
	mu       sync.Mutex
	s        Status
	oldest   int64  // unix ms of the oldest record not yet forwarded, 0 unknown
	logStart uint64 // the partition's, as last seen
	nowFunc  func() time.Time
	// source, when set, is read at every snapshot: the lag in records is
	// never older than the status itself, even while Kafka is away.
	source Source
	// holds counts the retention runs held back, as last seen.
	holds uint64
}

// retentionHolder is a source that reports what its retention floor held
// back (*Owner).
type retentionHolder interface {
	RetentionHold() owner.RetentionHold
}

// skipper is a source that says which offsets hold no record because a
// recovery skipped them (*Owner): they are not lag.
type skipper interface {
	Skipped(from, to uint64) uint64
}

func (u *uplinkStats) update(fn func(s *Status)) {
	u.mu.Lock()
	fn(&u.s)
	u.lagLocked()
	u.mu.Unlock()
}

// lagLocked recomputes LagRecords. Until the position is known (the first
// connection to Kafka), the lag counts from the log start: an upper bound.
func (u *uplinkStats) lagLocked() {
	from := max(u.s.Position, u.logStart)
	if u.s.HighWatermark > from {
		u.s.LagRecords = u.s.HighWatermark - from
		if sk, ok := u.source.(skipper); ok {
			u.s.LagRecords -= min(sk.Skipped(from, u.s.HighWatermark), u.s.LagRecords)
		}
	} else {
		u.s.LagRecords = 0
		u.oldest = 0
	}
}

// observe notes the partition's state.
func (u *uplinkStats) observe(st owner.PartitionState) {
	u.mu.Lock()
	u.s.HighWatermark, u.logStart = st.HighWatermark, st.LogStart
	u.lagLocked()
	u.mu.Unlock()
}

// setOldest notes the timestamp of the oldest record not yet forwarded;
// 0 forgets it.
func (u *uplinkStats) setOldest(ms int64, onlyIfUnknown bool) {
	u.mu.Lock()
	if !onlyIfUnknown || u.oldest == 0 {
		u.oldest = ms
	}
	u.mu.Unlock()
}

func (u *uplinkStats) snapshot() Status {
	if u.source != nil {
		st := u.source.State()
		u.observe(st)
		if h, ok := u.source.(retentionHolder); ok {
			u.noteHold(h.RetentionHold(), st.LogStart)
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.s
	if s.LagRecords > 0 && u.oldest > 0 {
		s.LagAge = max(0, u.nowFunc().Sub(time.UnixMilli(u.oldest)))
	}
	return s
}

// noteHold notes what the partition's retention floor held back at its
// latest run: the records between the log start and where retention alone
// would have started the log.
func (u *uplinkStats) noteHold(h owner.RetentionHold, logStart uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.s.HeldBack = 0
	if h.Held && h.Wanted > logStart {
		u.s.HeldBack = h.Wanted - logStart
	}
	if h.Times != u.holds {
		u.holds = h.Times
		u.s.HeldBackAt = u.nowFunc()
	}
}
