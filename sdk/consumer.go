package sdk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/wire"
)

// Consumer reads a topic's partitions with long polls. A named consumer
// (WithConsumerName) keeps its committed positions on the node and commits
// with the fence tokens of its polls. Poll is meant for one goroutine;
// Commit, CommitPolled and Seek may be called from others.
type Consumer struct {
	b       consumerBackend
	topic   string
	topicID [16]byte
	cfg     consumerConfig
	who     wire.Consumer

	pollMu  sync.Mutex // one Poll at a time
	stream  requestStream
	pending *inflightPoll // a poll whose caller stopped waiting
	busy    busyPolls

	mu      sync.Mutex
	cursors []*cursor
	byPart  map[int32]*cursor
	fenced  error
	closed  bool
}

// cursor is one partition's reading position.
type cursor struct {
	partition int32
	pos       Position
	last      *pollPartition // the latest poll's delivery on it
}

// pollPartition is one partition's part of a poll: its fence token and
// the range it delivered. Records keep a pointer to it, so a commit
// through a record carries its poll's token.
type pollPartition struct {
	topic     string
	partition int32
	token     []byte
	from      uint64
	next      uint64
	frame     *pollFrame // the reply the records' bytes alias
}

// consumerBackend is what a consumer needs of a client (and what tests
// fake).
type consumerBackend interface {
	streamOpener
	call(ctx context.Context, req, reply wire.Message) error
	committed(ctx context.Context, topic string, who wire.Consumer, partitions []int32) ([]committedWithToken, error)
	nextID() uint32
	requestTimeout() time.Duration
	// streamTimedOut is told that a request on st got no reply in time.
	streamTimedOut(st requestStream)
	logger() *slog.Logger
}

type inflightPoll struct {
	parts []*cursor // in request order
	done  chan pollResult
	// head receives where the poll's partition continues, read from the
	// start of a large reply (a poll of one partition sent with a head
	// hook); ahead is the poll then sent from there.
	head  chan uint64
	ahead *inflightPoll
}

type pollResult struct {
	raw []byte
	err error
}

// NewConsumer reads the topic's metadata, attaches a named consumer's
// session, and returns a consumer of the topic. Attaching fences every
// earlier process under the same name.
func (c *Client) NewConsumer(ctx context.Context, topic string, opts ...ConsumerOption) (*Consumer, error) {
	cfg := defaultConsumerConfig()
	for _, o := range opts {
		o.applyConsumer(&cfg)
	}
	if cfg.name == "" && cfg.autoCommit != AutoCommitNone {
		return nil, fmt.Errorf("sdk: %w (automatic commits)", ErrNotNamed)
	}
	if !cfg.startSet {
		cfg.start = AtFirst()
		if cfg.name != "" {
			cfg.start = AtCommitted()
		}
	}
	if cfg.start.mode == wire.PositionNext && cfg.name == "" {
		return nil, fmt.Errorf("sdk: %w (AtCommitted)", ErrNotNamed)
	}
	if cfg.commitPolicy != nil && cfg.name == "" {
		return nil, fmt.Errorf("sdk: %w (commit policy)", ErrNotNamed)
	}
	d, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	parts := cfg.partitions
	if len(parts) == 0 {
		for i := range d.Config.Partitions {
			parts = append(parts, int32(i))
		}
	}
	cons := &Consumer{b: c, topic: topic, topicID: d.ID, cfg: cfg, byPart: map[int32]*cursor{}}
	for _, p := range parts {
		if p < 0 || int(p) >= d.Config.Partitions {
			return nil, &Error{Op: "consume", Topic: topic, Partition: p, Status: wire.StatusUnknownPartition,
				Message: topicHasPartitions(d.Config.Partitions)}
		}
		if cons.byPart[p] != nil {
			continue
		}
		cur := &cursor{partition: p, pos: cfg.start}
		cons.cursors = append(cons.cursors, cur)
		cons.byPart[p] = cur
	}
	if cfg.name != "" {
		var reply wire.AttachConsumerReply
		if err := c.call(ctx, &wire.AttachConsumerRequest{Name: cfg.name}, &reply); err != nil {
			return nil, withTopic(err, topic)
		}
		cons.who = wire.Consumer{Kind: wire.ConsumerNamed, Name: cfg.name, Session: reply.Session}
		if p := cfg.commitPolicy; p != nil {
			req := &wire.SetPolicyRequest{Target: wire.PolicyConsumer, Name: cfg.name, Policy: *p}
			if err := c.call(ctx, req, &wire.SetPolicyReply{}); err != nil {
				return nil, withTopic(err, topic)
			}
		}
	}
	return cons, nil
}

// Topic returns the consumer's topic.
func (c *Consumer) Topic() string { return c.topic }

// Name returns the consumer's name ("" for an anonymous consumer).
func (c *Consumer) Name() string { return c.cfg.name }

// Session returns the session epoch the node handed this named consumer.
func (c *Consumer) Session() uint64 { return c.who.Session }

// Poll reads the next records of every partition of the consumer: it
// returns as soon as some are there, or with none after WithMaxWait. Each
// returned record remembers its poll's fence token, for Commit.
//
// Poll may return records and an error together (one partition failed,
// others delivered): process the records, then look at the error. A
// filter plugin's failure (WithFilter) is returned by the poll that met
// it, never taken for an empty poll: ErrPluginTimeout, ErrPluginTrap,
// ErrPluginMemoryLimit, ErrPluginInvalidAnswer, ErrPluginError and
// ErrPluginQuarantined say to give up, ErrPluginBusy and ErrPluginLoading
// to poll again (IsRetryable); nothing was consumed from the partitions it
// failed. A fenced session fails every later call with ErrFencedSession.
// When ctx ends first, Poll returns its error, and the records of the
// poll still on its way are returned by the next Poll, so none are lost.
// After the node restarted, Poll fails as a reset connection, and the
// next Poll reconnects and continues where the last delivery ended.
func (c *Consumer) Poll(ctx context.Context) ([]*Record, error) {
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	if err := c.state(); err != nil {
		return nil, err
	}
	if err := c.busy.wait(ctx); err != nil {
		return nil, err
	}
	inflight := c.pending
	c.pending = nil
	if inflight == nil {
		var err error
		if inflight, err = c.sendPoll(ctx); err != nil {
			return nil, err
		}
	}
	limit := time.NewTimer(c.cfg.maxWait + c.b.requestTimeout())
	defer limit.Stop()
	probe := time.NewTimer(c.cfg.maxWait + pollProbeAfter)
	defer probe.Stop()
	var res pollResult
	for waiting := true; waiting; {
		select {
		case res = <-inflight.done:
			waiting = false
		case next := <-inflight.head:
			c.sendAhead(ctx, inflight, next)
		case <-probe.C:
			c.probe()
		case <-ctx.Done():
			c.pending = inflight
			return nil, context.Cause(ctx)
		case <-limit.C:
			if c.stream != nil {
				c.b.streamTimedOut(c.stream)
			}
			c.abortStream()
			inflight.ahead = nil // it went with the stream
			res = <-inflight.done
			if res.err != nil {
				return nil, fmt.Errorf("sdk: poll %s: no reply within %v: %w", c.topic, c.cfg.maxWait+c.b.requestTimeout(), res.err)
			}
			waiting = false
		}
	}
	if res.err != nil {
		c.abortStream()
		return nil, transportError("poll", res.err)
	}
	var reply wire.PollReply
	if err := decodeReply(res.raw, &reply); err != nil {
		if inflight.ahead != nil {
			// The poll sent ahead assumed this reply: drop it with the
			// stream; the next poll starts where this one did.
			c.abortStream()
		}
		c.busy.note(err, c.cfg.maxWait)
		return nil, c.noteFenced(nodeError("poll", c.topic, -1, err))
	}
	c.pending = inflight.ahead
	frame := &pollFrame{buf: res.raw}
	recs, err := c.deliver(ctx, inflight, &reply, frame)
	if len(recs) == 0 {
		frame.recycle() // nothing aliases it
	}
	return recs, err
}

// pollProbeAfter is how long past its max wait a poll may go unanswered
// before the consumer probes the node (probe). A node answers every poll
// within its max wait, so a healthy one is never probed; the probe costs
// one small request, once a poll, and only when the poll is overdue.
const pollProbeAfter = time.Second

// probe sends the node a small request when a poll is overdue. A node
// that was killed and started again (the connection is unknown to it)
// answers any packet long enough with a stateless reset, but a parked
// poll sends nothing but keep-alives too short for one, and would wait
// out the request timeout. The probe is long enough: its reset ends the
// connection, the poll fails at once as a reset connection and the next
// Poll reconnects. A restarted node usually resets its predecessor's
// connections itself before that (docs/OPERATIONS.md); the probe covers
// those it did not know of. A slow node answers the probe and the poll
// keeps waiting, up to its max wait and the request timeout.
func (c *Consumer) probe() {
	ctx, cancel := context.WithTimeout(context.Background(), c.b.requestTimeout())
	go func() {
		defer cancel()
		_ = c.b.call(ctx, &wire.DescribeTopicRequest{Name: c.topic}, &wire.DescribeTopicReply{})
	}()
}

// prefetches says whether polls are sent ahead (WithPrefetch): never
// with automatic commits, which would commit records before the
// application saw them.
func (c *Consumer) prefetches() bool {
	return c.cfg.prefetch && c.cfg.autoCommit == AutoCommitNone
}

// pollHeadLen is how much of a poll reply's start the consumer looks at
// before the rest arrives: the fields of its first partition up to its
// batches, with a token of fence.TokenSize bytes, fit.
const pollHeadLen = 256

// sendAhead sends, while the rest of inflight's reply is still on its
// way, the poll that follows it: from next, where the start of the reply
// says its one partition continues. The node then reads while the client
// receives, and starts the next reply as soon as this one is written,
// instead of a round trip later. It does what deliver's prefetch would,
// earlier; deliver moves the cursor to the same offset.
func (c *Consumer) sendAhead(ctx context.Context, inflight *inflightPoll, next uint64) {
	if inflight.ahead != nil || c.stream == nil || len(inflight.parts) != 1 {
		return
	}
	c.mu.Lock()
	cur := inflight.parts[0]
	current := c.byPart[cur.partition] == cur
	c.mu.Unlock()
	if !current {
		return // a Seek moved the partition: its next poll starts there
	}
	if ahead, err := c.sendPollOf(ctx, []*cursor{cur}, []Position{AtOffset(next)}); err == nil {
		inflight.ahead = ahead
	}
}

func (c *Consumer) state() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return ErrClosed
	case c.fenced != nil:
		return c.fenced
	}
	return nil
}

// noteFenced remembers a fenced session: nothing this consumer does can
// succeed again.
func (c *Consumer) noteFenced(err error) error {
	if errors.Is(err, ErrFencedSession) {
		c.mu.Lock()
		if c.fenced == nil {
			c.fenced = err
		}
		c.mu.Unlock()
	}
	return err
}

func (c *Consumer) sendPoll(ctx context.Context) (*inflightPoll, error) {
	if err := c.resolveNext(ctx); err != nil {
		return nil, err
	}
	if c.stream == nil {
		// Two polls in flight: one being received, one sent ahead.
		st, _, err := c.b.openStream(ctx, 2)
		if err != nil {
			return nil, err
		}
		c.stream = st
	}
	c.mu.Lock()
	parts := slices.Clone(c.cursors)
	pos := make([]Position, len(parts))
	for i, cur := range parts {
		pos[i] = cur.pos
	}
	c.mu.Unlock()
	return c.sendPollOf(ctx, parts, pos)
}

// sendPollOf sends a poll of parts, each from its position in pos, on the
// consumer's stream. A poll of one partition that may be followed by a
// poll sent ahead asks for the start of its reply (sendAhead).
func (c *Consumer) sendPollOf(ctx context.Context, parts []*cursor, pos []Position) (*inflightPoll, error) {
	req := &wire.PollRequest{
		Consumer:    c.who,
		MaxWait:     c.cfg.maxWait,
		MaxMessages: uint32(c.cfg.maxMessages),
		MaxBytes:    uint32(c.cfg.maxBytes),
		AutoCommit:  c.cfg.autoCommit,
		Filter:      c.cfg.filter,
		Key:         c.cfg.key,
	}
	inflight := &inflightPoll{parts: parts, done: make(chan pollResult, 1)}
	for i, cur := range parts {
		req.Partitions = append(req.Partitions, wire.PollPartition{
			Topic: c.topic, TopicID: c.topicID, Partition: uint32(cur.partition), Position: pos[i].wire(c.cfg.reset),
		})
	}
	id := c.b.nextID()
	frame, err := wire.AppendRequest(nil, id, req)
	if err != nil {
		return nil, nodeError("poll", c.topic, -1, err)
	}
	cb := func(raw []byte, err error) { inflight.done <- pollResult{raw, err} }
	hs, ok := c.stream.(headSender)
	if ok && len(parts) == 1 && c.prefetches() {
		inflight.head = make(chan uint64, 1)
		head := func(start []byte) {
			if h, ok := wire.ParsePollReplyHead(start); ok && h.ID == id && h.Partitions == 1 && h.First.Status == wire.StatusOK {
				inflight.head <- h.First.Next
			}
		}
		err = hs.SendHead(ctx, frame, pollHeadLen, head, cb)
	} else {
		err = c.stream.Send(ctx, frame, cb)
	}
	if err != nil {
		c.abortStream()
		return nil, transportError("poll", err)
	}
	return inflight, nil
}

// resolveNext turns the cursors that continue from the committed
// position (AtCommitted) into explicit offsets before they are polled.
// The node's "next" also moves with what it delivers, so a poll from
// "next" whose reply is lost would, polled again, skip what it delivered;
// a poll from an explicit offset is answered the same way again. The
// node's own answer says where "next" starts (the committed offset
// resolved in the current history): a cursor takes it when the node
// resumes at the committed offset itself, or when the reset policy is
// ResetEarliest (the node's default, which the answer follows). In the
// other cases (no committed offset, or one retention overtook, with
// ResetLatest or ResetNone) the cursor stays on AtCommitted and the node
// applies the policy.
func (c *Consumer) resolveNext(ctx context.Context) error {
	if c.cfg.name == "" {
		return nil
	}
	c.mu.Lock()
	var (
		curs  []*cursor
		parts []int32
	)
	for _, cur := range c.cursors {
		if cur.pos.mode == wire.PositionNext {
			curs = append(curs, cur)
			parts = append(parts, cur.partition)
		}
	}
	c.mu.Unlock()
	if len(curs) == 0 {
		return nil
	}
	cs, err := c.b.committed(ctx, c.topic, c.who, parts)
	if err != nil {
		return c.noteFenced(err)
	}
	var errs []error
	c.mu.Lock()
	for i, cur := range curs {
		if i >= len(cs) || c.byPart[cur.partition] != cur || cur.pos.mode != wire.PositionNext {
			continue
		}
		if cs[i].Err != nil {
			errs = append(errs, cs[i].Err)
			continue
		}
		if pos, ok := c.committedStart(cs[i]); ok {
			cur.pos = pos
		}
	}
	c.mu.Unlock()
	for _, err := range errs {
		c.noteFenced(err)
	}
	return errors.Join(errs...)
}

// committedStart is where a poll from "next" would start, as an explicit
// position, when the node's answer says so unambiguously.
func (c *Consumer) committedStart(x committedWithToken) (Position, bool) {
	tok, err := fence.UnmarshalToken(x.token)
	if err != nil || tok.IsZero() {
		return Position{}, false
	}
	if c.cfg.reset == ResetEarliest || (x.Committed && x.History == uint64(tok.History) && x.Offset == tok.Next) {
		return AtOffset(tok.Next), true
	}
	return Position{}, false
}

// abortStream drops the poll stream; the next poll opens another.
func (c *Consumer) abortStream() {
	if c.stream == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = c.stream.Close(ctx)
	c.stream = nil
}

// deliver applies a poll reply: it moves the cursors, sends the next poll
// ahead (WithPrefetch) so the node reads while this one is decoded and
// processed, then decodes the records.
func (c *Consumer) deliver(ctx context.Context, inflight *inflightPoll, reply *wire.PollReply, frame *pollFrame) ([]*Record, error) {
	if len(reply.Partitions) != len(inflight.parts) {
		return nil, fmt.Errorf("sdk: poll %s: %d partitions in the reply, %d asked", c.topic, len(reply.Partitions), len(inflight.parts))
	}
	type delivery struct {
		cur     *cursor
		p       *wire.PollPartitionReply
		pp      *pollPartition
		oldPos  Position
		oldLast *pollPartition
	}
	var (
		todo         []delivery
		errs         []error
		pluginFailed bool
	)
	c.mu.Lock()
	for i := range reply.Partitions {
		p := &reply.Partitions[i]
		cur := inflight.parts[i]
		if c.byPart[cur.partition] != cur {
			continue // a Seek replaced the cursor meanwhile
		}
		err := statusError("poll", c.topic, uint32(cur.partition), p.Status, p.Message)
		switch {
		case err == nil:
			pp := newPollPartition(c.topic, cur, p, frame)
			todo = append(todo, delivery{cur: cur, p: p, pp: pp, oldPos: cur.pos, oldLast: cur.last})
			cur.pos, cur.last = AtOffset(p.Next), pp
		case p.Status == wire.StatusStaleHistory:
			// A purge or a lossy recovery: what we held is void. Resume
			// from the committed position (named) or the new start.
			cur.last = nil
			cur.pos = AtFirst()
			if c.cfg.name != "" {
				cur.pos = AtCommitted()
			}
			c.b.logger().Info("partition history changed; resuming", "topic", c.topic, "partition", cur.partition, "from", cur.pos)
		case p.Status.IsPlugin():
			// The filter failed (timed out, trapped, quarantined, its
			// budget full...): never silent, whatever the class, or a
			// looping filter would look like an empty topic. No poll is
			// sent ahead: it would run the filter again (another strike)
			// before the application decided to.
			errs = append(errs, err)
			pluginFailed = true
		case p.Status.RetryClass() == wire.ClassRetry:
			// Busy or shutting down: the next poll tries again.
		case errors.Is(err, ErrFencedSession):
			if c.fenced == nil {
				c.fenced = err
			}
			c.mu.Unlock()
			return nil, err
		default:
			errs = append(errs, err)
		}
	}
	c.mu.Unlock()

	if c.prefetches() && c.pending == nil && !pluginFailed {
		if next, err := c.sendPoll(ctx); err == nil {
			c.pending = next
			// The poll sent ahead is only queued: the stream's writer and
			// the connection's goroutines put it on the wire. With few
			// processors (GOMAXPROCS 1 on a small device) they would run
			// only once this goroutine blocks, after the decoding below
			// and the caller's processing, and the node would sit idle
			// meanwhile. Yielding once sends it first.
			runtime.Gosched()
		}
	}

	var out []*Record
	for _, d := range todo {
		recs, err := decodeRecords(d.pp, d.p.Batches)
		if err != nil {
			// Read this partition again from where the poll started; the
			// poll sent ahead assumed otherwise.
			c.mu.Lock()
			if c.byPart[d.cur.partition] == d.cur {
				d.cur.pos, d.cur.last = d.oldPos, d.oldLast
			}
			c.mu.Unlock()
			c.abortStream()
			c.pending = nil
			errs = append(errs, err)
			continue
		}
		out = appendRecords(out, recs)
	}
	return out, errors.Join(errs...)
}

// appendRecords adds one partition's records to those of a poll: a poll
// of one partition returns them as decoded, without a copy.
func appendRecords(out, recs []*Record) []*Record {
	if out == nil {
		return recs
	}
	return append(out, recs...)
}

// newPollPartition is one partition's delivery: its token, and the range
// the token says it covers (the node returns whole batches, which may
// start before it).
func newPollPartition(topic string, cur *cursor, p *wire.PollPartitionReply, frame *pollFrame) *pollPartition {
	pp := &pollPartition{topic: topic, partition: cur.partition, token: slices.Clone(p.Token), next: p.Next, frame: frame}
	if tok, err := fence.UnmarshalToken(p.Token); err == nil && !tok.IsZero() {
		pp.from = tok.From
	} else if cur.pos.mode == wire.PositionOffset {
		pp.from = cur.pos.offset
	}
	return pp
}

// minRecordBytes is the smallest a record is, uncompressed.
const minRecordBytes = 6

// decodeRecords decodes a delivery's batches into records within
// [pp.from, pp.next).
func decodeRecords(pp *pollPartition, batches []byte) ([]*Record, error) {
	count := 0
	for rest := batches; len(rest) > 0; {
		batch, r, err := wire.NextBatch(rest)
		if err != nil {
			return nil, fmt.Errorf("sdk: poll %s/%d: %w", pp.topic, pp.partition, err)
		}
		h, _ := record.ParseBatchHeader(batch)
		count += int(h.RecordCount)
		rest = r
	}
	// The counts are the node's claims, not yet verified: the arrays are
	// sized for at most one record per 6 bytes received (the smallest a
	// record is), and grow if compressed batches hold more.
	slab, out := recordArrays(min(count, len(batches)/minRecordBytes))
	if f := pp.frame; f != nil {
		// Handed back with the frame (Recycle); the slab is not
		// appended to past its capacity, see below.
		defer func() { f.slabs, f.lists = append(f.slabs, slab), append(f.lists, out) }()
	}
	var it record.RecordIterator
	for rest := batches; len(rest) > 0; {
		batch, r, _ := wire.NextBatch(rest)
		rest = r
		h, _ := record.ParseBatchHeader(batch)
		if h.LastOffset() < pp.from {
			continue
		}
		if h.Compression() != record.CompressionNone {
			// Records alias the iterator's buffer: give each compressed
			// batch its own.
			it = record.RecordIterator{}
		}
		if err := it.Reset(batch, record.BatchMaxSize); err != nil {
			return nil, fmt.Errorf("sdk: poll %s/%d: %w", pp.topic, pp.partition, err)
		}
		for {
			wr, ok := it.Next()
			if !ok {
				break
			}
			if wr.Offset < pp.from || wr.Offset >= pp.next {
				continue
			}
			// Filled in place: appending a whole Record would copy it
			// with a bulk write barrier while the collector runs. The
			// headers' counts sized the slab; a batch cannot yield more.
			if len(slab) < cap(slab) {
				slab = slab[:len(slab)+1]
			} else {
				slab = append(slab, Record{})
			}
			r := &slab[len(slab)-1]
			r.Topic, r.Partition, r.Offset = pp.topic, pp.partition, wr.Offset
			r.Timestamp = time.UnixMilli(wr.Timestamp)
			r.Key, r.Value, r.poll = wr.Key, wr.Value, pp
			r.Headers = nil // a recycled record may have had some
			if len(wr.Headers) > 0 {
				r.Headers = slices.Clone(wr.Headers)
			}
			out = append(out, r)
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("sdk: poll %s/%d: %w", pp.topic, pp.partition, err)
		}
	}
	return out, nil
}

// Seek moves a partition's reading position; the next Poll reads from
// there. It does not change the committed position (see ResetPosition).
// A poll still on its way is dropped.
func (c *Consumer) Seek(partition int32, pos Position) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.byPart[partition]
	if cur == nil {
		return &Error{Op: "seek", Topic: c.topic, Partition: partition, Status: wire.StatusUnknownPartition,
			Message: "the consumer does not read this partition"}
	}
	if pos.mode == wire.PositionNext && c.cfg.name == "" {
		return fmt.Errorf("sdk: %w (AtCommitted)", ErrNotNamed)
	}
	// A new cursor: replies to polls sent before the seek no longer move it.
	nc := &cursor{partition: partition, pos: pos, last: cur.last}
	c.byPart[partition] = nc
	for i, x := range c.cursors {
		if x == cur {
			c.cursors[i] = nc
		}
	}
	return nil
}

// SeekAll moves every partition's reading position to pos.
func (c *Consumer) SeekAll(pos Position) error {
	c.mu.Lock()
	parts := make([]int32, len(c.cursors))
	for i, cur := range c.cursors {
		parts[i] = cur.partition
	}
	c.mu.Unlock()
	for _, p := range parts {
		if err := c.Seek(p, pos); err != nil {
			return err
		}
	}
	return nil
}

// Close ends the consumer. With AutoCommitOnNextPoll it first commits
// what the last poll returned.
func (c *Consumer) Close(ctx context.Context) error {
	var err error
	if c.cfg.autoCommit == AutoCommitOnNextPoll && c.state() == nil {
		err = c.CommitPolled(ctx)
	}
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	if c.stream != nil {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if c.pending != nil {
			cancel() // a long poll may be parked: do not wait for it
		}
		_ = c.stream.Close(cctx)
		c.stream = nil
	}
	return err
}

// decodePollPartition decodes one partition's part of a poll reply and
// moves the cursor past what the poll covered.
func decodePollPartition(topic string, cur *cursor, p *wire.PollPartitionReply, frame *pollFrame) ([]*Record, error) {
	pp := newPollPartition(topic, cur, p, frame)
	recs, err := decodeRecords(pp, p.Batches)
	if err != nil {
		return nil, err
	}
	cur.pos, cur.last = AtOffset(p.Next), pp
	return recs, nil
}

// topicHasPartitions is the message of an unknown partition: "the topic
// has 1 partition", "the topic has 4 partitions".
func topicHasPartitions(n int) string {
	if n == 1 {
		return "the topic has 1 partition"
	}
	return fmt.Sprintf("the topic has %d partitions", n)
}
