package main

import (
	"context"
	"fmt"

	"github.com/ledgemq/ledge/sdk"
)

// An offset given to consume --from is checked against each partition's
// range before reading, as Kafka's clients do: a consumer must not
// silently replay a partition from its start because it asked for an
// offset that does not exist yet.
//
//   - below the start offset: an error naming the start, unless --reset
//     says where to go instead;
//   - past the end (the next offset): --follow waits for it (the partition
//     is read from its end and records below the offset are not printed);
//     without --follow, an error naming the next offset.

// fromPlan is what consume does with an offset that needs care.
type fromPlan struct {
	waitFor uint64           // print no record below this offset (0: print all)
	seek    map[int32]uint64 // partitions to read from their end: offset of the end
}

// resetPolicy maps --reset to the SDK's policy; "" is none, where an
// offset out of range fails the poll.
func resetPolicy(s string) (sdk.ResetPolicy, error) {
	switch s {
	case "":
		return sdk.ResetNone, nil
	case "earliest":
		return sdk.ResetEarliest, nil
	case "latest":
		return sdk.ResetLatest, nil
	}
	return 0, fmt.Errorf("--reset %q: use earliest or latest", s)
}

// planFrom checks offset n against the partitions consume reads.
func planFrom(ctx context.Context, c *sdk.Client, topic string, f *consumeFlags, n uint64) (fromPlan, error) {
	var plan fromPlan
	if f.reset != "" {
		return plan, nil // the node applies the reset policy
	}
	parts := make([]int32, len(f.partitions))
	for i, p := range f.partitions {
		parts[i] = int32(p)
	}
	states, err := c.PartitionState(ctx, topic, parts...)
	if err != nil {
		return plan, err
	}
	for _, s := range states {
		if s.Err != nil {
			return plan, s.Err
		}
		switch {
		case n < s.StartOffset:
			return plan, fmt.Errorf("offset %d is below the start of %s/%d (first offset %d): use --from earliest, or --reset earliest or latest",
				n, topic, s.Partition, s.StartOffset)
		case n > s.HighWatermark && !f.follow:
			return plan, fmt.Errorf("offset %d is past the end of %s/%d (next offset %d): --follow waits for it",
				n, topic, s.Partition, s.HighWatermark)
		case n > s.HighWatermark:
			if plan.seek == nil {
				plan.seek = map[int32]uint64{}
			}
			plan.seek[s.Partition] = s.HighWatermark
			plan.waitFor = n
		}
	}
	return plan, nil
}

// apply moves the consumer's partitions that wait for the offset to
// their end.
func (p fromPlan) apply(cons *sdk.Consumer) error {
	for part, end := range p.seek {
		if err := cons.Seek(part, sdk.AtOffset(end)); err != nil {
			return err
		}
	}
	return nil
}

// keep drops the records below the offset waited for.
func (p fromPlan) keep(recs []*sdk.Record) []*sdk.Record {
	if p.waitFor == 0 {
		return recs
	}
	out := recs[:0]
	for _, r := range recs {
		if r.Offset >= p.waitFor {
			out = append(out, r)
		}
	}
	return out
}
