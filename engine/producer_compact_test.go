package engine

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/ledgemq/ledge/fence"
)

func encodeAll(t *testing.T, m map[fence.ProducerID]*fence.ProducerState) map[fence.ProducerID][]byte {
	t.Helper()
	out := make(map[fence.ProducerID][]byte, len(m))
	for id, s := range m {
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		out[id] = b
	}
	return out
}

// TestCompactProdRecsKeepsTheState: applying the compacted producer
// records gives the same producer state as applying them all, from any
// starting state, whatever the mix of producers, epochs and batch sizes.
func TestCompactProdRecsKeepsTheState(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 500 {
		var recs []prodRec
		start := make(map[fence.ProducerID]*fence.ProducerState)
		epochs := map[fence.ProducerID]fence.ProducerEpoch{}
		seqs := map[fence.ProducerID]int32{}
		producers := 1 + rng.IntN(5)
		for id := 1; id <= producers; id++ {
			epochs[fence.ProducerID(id)] = fence.ProducerEpoch(rng.IntN(3))
			if rng.IntN(2) == 0 {
				start[fence.ProducerID(id)] = &fence.ProducerState{}
				for range rng.IntN(12) {
					applyProducer(start, prodRec{id: fence.ProducerID(id), epoch: fence.ProducerEpoch(rng.IntN(3)), seq: 0, count: 1})
				}
			}
		}
		off := uint64(1000)
		for range rng.IntN(200) {
			id := fence.ProducerID(1 + rng.IntN(producers))
			if rng.IntN(25) == 0 {
				epochs[id]++
				seqs[id] = 0
			}
			n := int32(1 + rng.IntN(4))
			recs = append(recs, prodRec{id: id, epoch: epochs[id], seq: seqs[id], count: n, base: off, last: off + uint64(n) - 1})
			seqs[id] += n
			off += uint64(n)
		}
		all, compacted := cloneProducers(start), cloneProducers(start)
		for _, r := range recs {
			applyProducer(all, r)
		}
		kept := compactProdRecs(append([]prodRec(nil), recs...))
		for _, r := range kept {
			applyProducer(compacted, r)
		}
		// The durable producer state is only ever observed encoded (the
		// snapshots): compare the encodings.
		if got, want := encodeAll(t, compacted), encodeAll(t, all); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: %d records compacted to %d give a different state", round, len(recs), len(kept))
		}
		if len(kept) > producers*fence.ProducerWindow {
			t.Fatalf("round %d: kept %d records of %d producers", round, len(kept), producers)
		}
	}
}
