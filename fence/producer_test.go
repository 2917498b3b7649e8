package fence

import (
	"errors"
	"testing"

	"pgregory.net/rapid"
)

const pid ProducerID = 42

func req(epoch ProducerEpoch, base, count int32) ProduceRequest {
	return ProduceRequest{Producer: pid, Epoch: epoch, BaseSequence: base, Count: count}
}

// appended returns a state of epoch 3 with batches [0,9] [10,19] [20,29]
// at offsets 100.., 200.., 300...
func appended() *ProducerState {
	var s ProducerState
	for i := int32(0); i < 3; i++ {
		s.Record(req(3, i*10, 10), uint64(100*(i+1)), uint64(100*(i+1)+9))
	}
	return &s
}

// covers: G9 G10 G11
func TestCheckProduce(t *testing.T) {
	reg3 := Registration{Epoch: 3, Known: true}
	cases := []struct {
		name string
		reg  Registration
		s    *ProducerState
		r    ProduceRequest
		dup  bool
		base uint64
		want error
	}{
		{"no producer", Registration{}, nil, ProduceRequest{BaseSequence: -1, Count: 5}, false, 0, nil},
		{"first batch", reg3, nil, req(3, 0, 10), false, 0, nil},
		{"first batch must start at 0", reg3, nil, req(3, 5, 10), false, 0, ErrOutOfOrderSequence},
		{"next sequence", reg3, appended(), req(3, 30, 5), false, 0, nil},
		{"gap", reg3, appended(), req(3, 31, 5), false, 0, ErrOutOfOrderSequence},
		{"duplicate of the newest", reg3, appended(), req(3, 20, 10), true, 300, nil},
		{"duplicate of an older batch", reg3, appended(), req(3, 0, 10), true, 100, nil},
		{"overlapping, not a batch", reg3, appended(), req(3, 5, 10), false, 0, ErrOutOfOrderSequence},
		{"no sequence", reg3, appended(), req(3, -1, 10), false, 0, ErrOutOfOrderSequence},
		{"zombie: older incarnation", Registration{Epoch: 4, Known: true}, appended(), req(3, 30, 5), false, 0, ErrFencedProducer},
		// The partition last saw epoch 3, but the node registered 4: the
		// zombie must be refused even though this partition never saw 4.
		{"zombie on a partition the new incarnation never touched", Registration{Epoch: 4, Known: true}, nil, req(3, 0, 5), false, 0, ErrFencedProducer},
		{"new incarnation starts at 0", Registration{Epoch: 4, Known: true}, appended(), req(4, 0, 5), false, 0, nil},
		{"new incarnation must start at 0", Registration{Epoch: 4, Known: true}, appended(), req(4, 30, 5), false, 0, ErrOutOfOrderSequence},
		{"unregistered", Registration{}, nil, req(0, 0, 1), false, 0, ErrUnknownProducer},
		{"epoch from the future", reg3, nil, req(5, 0, 1), false, 0, ErrUnknownProducer},
		{"registration behind the partition", Registration{Epoch: 2, Known: true}, appended(), req(2, 0, 1), false, 0, ErrFencedProducer},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := CheckProduce(c.reg, c.s, c.r)
			wantErr(t, err, c.want)
			if v.Duplicate != c.dup || (c.dup && v.Base != c.base) {
				t.Fatalf("verdict %+v, want duplicate=%v base=%d", v, c.dup, c.base)
			}
		})
	}
}

// covers: G9
func TestProduceDuplicateBeyondWindow(t *testing.T) {
	var s ProducerState
	for i := int32(0); i < ProducerWindow+2; i++ {
		s.Record(req(1, i, 1), uint64(i), uint64(i))
	}
	_, err := CheckProduce(Registration{Epoch: 1, Known: true}, &s, req(1, 0, 1))
	if !errors.Is(err, ErrDuplicateSequence) {
		t.Fatalf("got %v, want ErrDuplicateSequence", err)
	}
	v, err := CheckProduce(Registration{Epoch: 1, Known: true}, &s, req(1, 2, 1))
	if err != nil || !v.Duplicate || v.Base != 2 {
		t.Fatalf("oldest remembered batch: %+v %v", v, err)
	}
}

func TestProduceSequenceWraps(t *testing.T) {
	var s ProducerState
	reg := Registration{Epoch: 1, Known: true}
	s.Record(req(1, 0, 1), 0, 0)
	s.Record(req(1, 1, maxSequence-1), 1, maxSequence-1) // last seq = maxSequence-1
	if _, err := CheckProduce(reg, &s, req(1, maxSequence, 3)); err != nil {
		t.Fatalf("batch across the wrap: %v", err)
	}
	s.Record(req(1, maxSequence, 3), maxSequence, maxSequence+2) // seqs maxSequence, 0, 1
	if _, err := CheckProduce(reg, &s, req(1, 2, 1)); err != nil {
		t.Fatalf("after the wrap: %v", err)
	}
	if v, err := CheckProduce(reg, &s, req(1, maxSequence, 3)); err != nil || !v.Duplicate {
		t.Fatalf("duplicate across the wrap: %+v %v", v, err)
	}
}

// covers: G9 G10 G12
func TestProducerStateModel(t *testing.T) {
	// Against a model that remembers every batch: an accepted next batch,
	// a duplicate answered with the model's offsets, a gap refused; the
	// encoding round trips at every step.
	rapid.Check(t, func(rt *rapid.T) {
		var s ProducerState
		reg := Registration{Epoch: 1, Known: true}
		type batch struct {
			first, count int32
			base         uint64
		}
		var log []batch
		next, off := int32(0), uint64(0)
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			count := rapid.Int32Range(1, 4).Draw(rt, "count")
			switch rapid.IntRange(0, 2).Draw(rt, "op") {
			case 0: // next batch
				v, err := CheckProduce(reg, &s, req(1, next, count))
				if err != nil || v.Duplicate {
					rt.Fatalf("next batch refused: %v %+v", err, v)
				}
				s.Record(req(1, next, count), off, off+uint64(count)-1)
				log = append(log, batch{next, count, off})
				next += count
				off += uint64(count) + 7
			case 1: // retry of a recent batch
				if len(log) == 0 {
					continue
				}
				b := log[len(log)-1-rapid.IntRange(0, min(len(log), ProducerWindow)-1).Draw(rt, "back")]
				v, err := CheckProduce(reg, &s, req(1, b.first, b.count))
				if err != nil || !v.Duplicate || v.Base != b.base {
					rt.Fatalf("retry of %+v: %v %+v", b, err, v)
				}
			case 2: // gap
				gap := rapid.Int32Range(1, 5).Draw(rt, "gap")
				if _, err := CheckProduce(reg, &s, req(1, next+gap, count)); !errors.Is(err, ErrOutOfOrderSequence) {
					rt.Fatalf("gap accepted: %v", err)
				}
			}
			enc, _ := s.MarshalBinary()
			var back ProducerState
			if err := back.UnmarshalBinary(enc); err != nil || back.Len() != s.Len() || back.Epoch != s.Epoch {
				rt.Fatalf("encoding round trip: %v", err)
			}
			for i := range s.Len() {
				if back.Batch(i) != s.Batch(i) {
					rt.Fatalf("batch %d differs after round trip", i)
				}
			}
		}
	})
}

func TestProducerStateRejectsBadEncoding(t *testing.T) {
	enc, _ := appended().MarshalBinary()
	for _, b := range [][]byte{nil, enc[:5], enc[:len(enc)-1], append([]byte{9}, enc[1:]...)} {
		var s ProducerState
		if err := s.UnmarshalBinary(b); err == nil {
			t.Errorf("accepted %x", b)
		}
	}
}

// covers: G12
func TestProducerStateForgetsLostBatches(t *testing.T) {
	s := appended() // batches at 100-109, 200-209, 300-309
	s.Forget(205)   // a lossy recovery kept offsets below 205
	if s.Len() != 1 || s.Batch(0).Base != 100 {
		t.Fatalf("after Forget(205): %d batches, newest at %d", s.Len(), s.Batch(0).Base)
	}
	reg := Registration{Epoch: 3, Known: true}
	if v, err := CheckProduce(reg, s, req(3, 10, 10)); err != nil || v.Duplicate {
		t.Fatalf("a retry of a lost batch must be appended again: %+v %v", v, err)
	}
	s.Forget(0)
	if _, err := CheckProduce(reg, s, req(3, 0, 10)); err != nil {
		t.Fatalf("an emptied window starts at 0 again: %v", err)
	}
}

// A re-initialization passes the same incarnation rule as every batch:
// only the registered epoch of a known producer may re-initialize.
// covers: G11
func TestCheckIncarnation(t *testing.T) {
	reg3 := Registration{Epoch: 3, Known: true}
	wantErr(t, CheckIncarnation(reg3, pid, 3), nil)
	wantErr(t, CheckIncarnation(reg3, pid, 2), ErrFencedProducer)
	wantErr(t, CheckIncarnation(reg3, pid, 4), ErrUnknownProducer)
	wantErr(t, CheckIncarnation(Registration{}, pid, 0), ErrUnknownProducer)
}
