package fence_test

import (
	"errors"
	"fmt"

	"github.com/ledgemq/ledge/fence"
)

// A poll planned in one history and completed after a purge is refused:
// the reply is not sent and no progress changes.
func Example_pollAcrossPurge() {
	topic := fence.TopicID{1}
	holder := fence.Holder{Kind: fence.HolderConsumer, Consumer: fence.NameHash("billing"), Session: 1}

	// Plan, on the owner: offsets 0-2 are stored in history 1.
	before := fence.Partition{Topic: topic, History: 1, LogStart: 0, HighWatermark: 3}
	tok := fence.Issue(before, holder, 0)

	// The read runs elsewhere and ends at offset 3. Meanwhile the partition
	// is purged (history 2, start 3) and five messages arrive.
	tok = tok.Through(3)
	now := fence.Partition{Topic: topic, History: 2, LogStart: 3, HighWatermark: 8}

	// Complete, on the owner.
	err := fence.CheckPollCompletion(now, holder, tok)
	fmt.Println(errors.Is(err, fence.ErrStaleHistory), fence.Retryable(err))

	// The consumer's old bookmark resumes at the new start, not at 3-by-luck
	// nor at "no committed offset".
	lineage := []fence.HistoryTransition{
		{Epoch: 1, Kind: fence.TransitionCreate},
		{Epoch: 2, Start: 3, Kind: fence.TransitionPurge},
	}
	res, _ := fence.ResolveBookmark(now, lineage, 0, 1)
	fmt.Println(res.Offset, res.Moved)
	// Output:
	// true true
	// 3 true
}

// A retry of an appended batch is answered with its original offsets.
func ExampleCheckProduce() {
	reg := fence.Registration{Epoch: 1, Known: true}
	var state fence.ProducerState
	batch := fence.ProduceRequest{Producer: 7, Epoch: 1, BaseSequence: 0, Count: 5}

	if _, err := fence.CheckProduce(reg, &state, batch); err == nil {
		state.Record(batch, 40, 44) // the engine assigned 40-44
	}
	v, err := fence.CheckProduce(reg, &state, batch) // the reply was lost; the producer resends
	fmt.Println(v.Duplicate, v.Base, v.Last, err)

	// A newer incarnation registers epoch 2; the old one is a zombie.
	reg.Epoch = 2
	_, err = fence.CheckProduce(reg, &state, fence.ProduceRequest{Producer: 7, Epoch: 1, BaseSequence: 5, Count: 1})
	fmt.Println(errors.Is(err, fence.ErrFencedProducer))
	// Output:
	// true 40 44 <nil>
	// true
}
