package sdk

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ledgemq/ledge/transport/wire"
)

// Commit commits, for each partition among recs, the position after its
// highest record — the consumer resumes there — carrying the fence token
// of the poll that returned that record. The node refuses a commit whose
// poll is from another world: ErrStaleHistory after a purge (poll again
// from the committed position), ErrFencedSession once another process
// attached under the name. Commit never moves a committed position
// backwards (ErrCommitBackwards); ResetPosition does.
func (c *Consumer) Commit(ctx context.Context, recs ...*Record) error {
	best := map[int32]*Record{}
	var order []int32
	for _, r := range recs {
		if r.poll == nil || r.poll.topic != c.topic {
			return fmt.Errorf("sdk: commit: record %s/%d@%d was not returned by this consumer's Poll", r.Topic, r.Partition, r.Offset)
		}
		b, ok := best[r.Partition]
		if !ok {
			order = append(order, r.Partition)
		}
		if !ok || r.Offset > b.Offset {
			best[r.Partition] = r
		}
	}
	offsets := make([]wire.CommitOffset, 0, len(order))
	for _, p := range order {
		r := best[p]
		offsets = append(offsets, wire.CommitOffset{Topic: c.topic, Partition: uint32(p), Offset: r.Offset + 1, Token: r.poll.token})
	}
	return c.commit(ctx, offsets)
}

// CommitPolled commits everything the latest poll of each partition
// covered (including records a filter dropped), with that poll's token.
// Partitions whose latest poll returned nothing are left alone.
func (c *Consumer) CommitPolled(ctx context.Context) error {
	c.mu.Lock()
	var offsets []wire.CommitOffset
	for _, cur := range c.cursors {
		if pp := cur.last; pp != nil && pp.next > pp.from {
			offsets = append(offsets, wire.CommitOffset{Topic: c.topic, Partition: uint32(cur.partition), Offset: pp.next, Token: pp.token})
		}
	}
	c.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	return c.commit(ctx, offsets)
}

func (c *Consumer) commit(ctx context.Context, offsets []wire.CommitOffset) error {
	if c.cfg.name == "" {
		return ErrNotNamed
	}
	if err := c.state(); err != nil {
		return err
	}
	if len(offsets) == 0 {
		return nil
	}
	var reply wire.CommitReply
	if err := c.b.call(ctx, &wire.CommitRequest{Consumer: c.who, Offsets: offsets}, &reply); err != nil {
		return c.noteFenced(withTopic(err, c.topic))
	}
	var errs []error
	for i, r := range reply.Partitions {
		if i >= len(offsets) {
			break
		}
		if err := statusError("commit", c.topic, offsets[i].Partition, r.Status, r.Message); err != nil {
			errs = append(errs, c.noteFenced(err))
		}
	}
	return errors.Join(errs...)
}

// ResetPosition moves a named consumer's committed position on a
// partition to pos, backwards if need be, in one fenced step on the node,
// and reads from there next. It returns the committed offset pos resolved
// to.
func (c *Consumer) ResetPosition(ctx context.Context, partition int32, pos Position) (uint64, error) {
	if c.cfg.name == "" {
		return 0, ErrNotNamed
	}
	if pos.mode == wire.PositionNext {
		return 0, fmt.Errorf("sdk: ResetPosition needs a position other than AtCommitted")
	}
	if err := c.state(); err != nil {
		return 0, err
	}
	// The token proves which session and history the reset was made in.
	cs, err := c.b.committed(ctx, c.topic, c.who, []int32{partition})
	if err != nil {
		return 0, c.noteFenced(err)
	}
	if len(cs) != 1 {
		return 0, fmt.Errorf("sdk: get-committed %s/%d: %d answers", c.topic, partition, len(cs))
	}
	if cs[0].Err != nil {
		return 0, c.noteFenced(cs[0].Err)
	}
	req := &wire.ResetPositionRequest{Consumer: c.who, Partitions: []wire.ResetPartition{{
		Topic: c.topic, Partition: uint32(partition), Position: pos.wire(0), Token: cs[0].token,
	}}}
	var reply wire.ResetPositionReply
	if err := c.b.call(ctx, req, &reply); err != nil {
		return 0, c.noteFenced(withTopic(err, c.topic))
	}
	if len(reply.Partitions) != 1 {
		return 0, fmt.Errorf("sdk: reset-position %s/%d: %d answers", c.topic, partition, len(reply.Partitions))
	}
	r := reply.Partitions[0]
	if err := statusError("reset-position", c.topic, uint32(partition), r.Status, r.Message); err != nil {
		return 0, c.noteFenced(err)
	}
	if err := c.Seek(partition, AtOffset(r.Offset)); err != nil {
		return r.Offset, err
	}
	return r.Offset, nil
}

// Committed returns this consumer's committed positions on its partitions.
func (c *Consumer) Committed(ctx context.Context) ([]CommittedOffset, error) {
	if c.cfg.name == "" {
		return nil, ErrNotNamed
	}
	c.mu.Lock()
	parts := make([]int32, len(c.cursors))
	for i, cur := range c.cursors {
		parts[i] = cur.partition
	}
	c.mu.Unlock()
	cs, err := c.b.committed(ctx, c.topic, c.who, parts)
	if err != nil {
		return nil, c.noteFenced(err)
	}
	out := make([]CommittedOffset, len(cs))
	for i, x := range cs {
		out[i] = x.CommittedOffset
	}
	return out, nil
}

// Partitions returns the partitions the consumer reads.
func (c *Consumer) Partitions() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int32, len(c.cursors))
	for i, cur := range c.cursors {
		out[i] = cur.partition
	}
	return slices.Clip(out)
}
