package group

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// The group under real concurrency: members join, heartbeat, poll and
// commit (some commits late) in their own goroutines while the clock
// moves and sessions expire. Every commit and every assignment installed
// on an owner is recorded with its call and return; porcupine then checks
// that each partition's history is linearizable against a model in which
// a commit takes effect only if its member holds the partition, under an
// assignment epoch no later than the commit's epoch, and never moves the
// committed offset backwards — and in which a refused commit changes
// nothing (reads of the committed offset check that).

type linOp struct {
	kind   int // linAssign, linUnassign, linCommit, linRead
	member string
	epoch  fence.MemberEpoch // assign: assignment epoch; commit: the token's epoch
	offset uint64
}

const (
	linAssign = iota
	linUnassign
	linCommit
	linRead
)

type linOut struct {
	ok     bool
	offset uint64
}

type linState struct {
	holder    string
	ae        fence.MemberEpoch
	committed uint64
}

var linModel = porcupine.Model{
	Init: func() any { return linState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(linState), input.(linOp), output.(linOut)
		switch in.kind {
		case linAssign:
			s.holder, s.ae = in.member, in.epoch
			return true, s
		case linUnassign:
			s.holder, s.ae = "", 0
			return true, s
		case linCommit:
			if !out.ok {
				return true, s
			}
			if s.holder != in.member || in.epoch < s.ae || in.offset < s.committed {
				return false, s
			}
			s.committed = in.offset
			return true, s
		case linRead:
			return out.offset == s.committed, s
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linOp), output.(linOut)
		switch in.kind {
		case linAssign:
			return fmt.Sprintf("assign %s@%d", in.member, in.epoch)
		case linUnassign:
			return "unassign"
		case linCommit:
			return fmt.Sprintf("commit %s e%d %d -> %v", in.member, in.epoch, in.offset, out.ok)
		}
		return fmt.Sprintf("read -> %d", out.offset)
	},
}

// linHistory records operations per partition.
type linHistory struct {
	clock atomic.Int64
	mu    sync.Mutex
	ops   map[int][]porcupine.Operation
}

func (h *linHistory) record(p, client int, in linOp, call int64, out linOut) {
	ret := h.clock.Add(1)
	h.mu.Lock()
	h.ops[p] = append(h.ops[p], porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
}

// recordingAssigner records the owner steps the coordinator runs.
type recordingAssigner struct {
	o *owner.Owner
	p int
	h *linHistory
}

func (r recordingAssigner) Assign(group, member string, ae fence.MemberEpoch) {
	call := r.h.clock.Add(1)
	r.o.Assign(group, member, ae)
	r.h.record(r.p, 0, linOp{kind: linAssign, member: member, epoch: ae}, call, linOut{ok: true})
}

func (r recordingAssigner) Unassign(group string) {
	call := r.h.clock.Add(1)
	r.o.Unassign(group)
	r.h.record(r.p, 0, linOp{kind: linUnassign}, call, linOut{ok: true})
}

func TestGroupLinearizable(t *testing.T) {
	const partitions, members, steps = 2, 4, 3000
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := context.Background()
			h := &linHistory{ops: map[int][]porcupine.Operation{}}
			w := newGroupWorld(t)
			w.topics.wrap = func(_ string, p int, o *owner.Owner) PartitionAssigner { return recordingAssigner{o, p, h} }
			tt := w.createTopic("t", partitions)
			for p := range partitions {
				vals := make([]string, 400)
				for i := range vals {
					vals[i] = "v"
				}
				w.produce("t", p, vals...)
			}
			var accepted atomic.Int64
			var wg sync.WaitGroup
			done := make(chan struct{})
			for i := range members {
				wg.Go(func() {
					runLinMember(ctx, w, h, tt, i+1, rand.New(rand.NewPCG(seed, uint64(i))), steps, &accepted)
				})
			}
			driverDone := make(chan struct{})
			go func() {
				defer close(driverDone)
				rnd := rand.New(rand.NewPCG(seed, 99))
				for {
					select {
					case <-done:
						return
					default:
					}
					w.clock.Advance(time.Duration(rnd.IntN(1500)) * time.Millisecond)
					if err := w.groups.Expire(ctx); err != nil {
						t.Error(err)
					}
					for p := range partitions {
						call := h.clock.Add(1)
						off, _ := w.committed("g", "t", p)
						h.record(p, members+1, linOp{kind: linRead}, call, linOut{offset: off})
					}
					for range 20 {
						runtime.Gosched()
					}
				}
			}()
			wg.Wait()
			close(done)
			<-driverDone
			for p := range partitions {
				res := porcupine.CheckOperationsTimeout(linModel, h.ops[p], 20*time.Second)
				switch res {
				case porcupine.Illegal:
					t.Fatalf("t/%d: the history of %d operations is not linearizable", p, len(h.ops[p]))
				case porcupine.Unknown:
					t.Logf("t/%d: porcupine timed out over %d operations", p, len(h.ops[p]))
				}
			}
			t.Logf("%d commits accepted; %d and %d operations", accepted.Load(), len(h.ops[0]), len(h.ops[1]))
		})
	}
}

// runLinMember is one member's client: it heartbeats, polls what it owns,
// commits (now or later), pauses and leaves, at random.
func runLinMember(ctx context.Context, w *groupWorld, h *linHistory, tt *testTopic, client int, rnd *rand.Rand, steps int, accepted *atomic.Int64) {
	id := fmt.Sprintf("m%d", client)
	var (
		joined bool
		epoch  fence.MemberEpoch
		owns   []wire.TopicPartition
		held   []fence.Token
		paused int
	)
	take := func(a wire.MemberAssignment) {
		epoch = fence.MemberEpoch(a.MemberEpoch)
		owns = owns[:0]
		for _, p := range a.Assignment {
			owns = append(owns, wire.TopicPartition{Topic: p.Topic, Partition: p.Partition})
		}
	}
	commit := func(tok fence.Token) {
		call := h.clock.Add(1)
		err := tt.owners[tok.Partition].Commit(ctx, owner.CommitRequest{
			Consumer: owner.Consumer{Name: "g", Member: id, MemberEpoch: epoch}, Token: tok, Offset: tok.Next,
		})
		if err == nil {
			accepted.Add(1)
		}
		h.record(int(tok.Partition), client, linOp{kind: linCommit, member: id, epoch: tok.MemberEpoch, offset: tok.Next}, call, linOut{ok: err == nil})
	}
	for range steps {
		runtime.Gosched()
		if !joined {
			a, err := w.groups.Join(ctx, JoinRequest{Group: "g", Member: id, Topics: []string{"t"}})
			if err == nil {
				joined, owns = true, nil
				take(a)
			}
			continue
		}
		switch r := rnd.IntN(100); {
		case paused > 0:
			paused--
		case r < 35:
			a, err := w.groups.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: id, Epoch: epoch, Owned: owns})
			if err != nil {
				joined, owns = false, nil
				continue
			}
			take(a)
		case r < 65:
			if len(owns) == 0 {
				continue
			}
			p := owns[rnd.IntN(len(owns))].Partition
			res, err := tt.owners[p].Poll(ctx, owner.PollRequest{
				Consumer: owner.Consumer{Name: "g", Member: id, MemberEpoch: epoch}, From: owner.FromNext, MaxBytes: 1 + rnd.IntN(300),
			})
			if err == nil && res.Token.Next > res.Token.From {
				held = append(held, res.Token)
			}
		case r < 90:
			if len(held) == 0 {
				continue
			}
			i := rnd.IntN(len(held))
			if rnd.IntN(3) > 0 {
				i = len(held) - 1
			}
			commit(held[i])
			held = append(held[:i], held[i+1:]...)
		case r < 97:
			paused = rnd.IntN(40)
		default:
			_ = w.groups.Leave(ctx, "g", id, epoch)
			joined, owns = false, nil
		}
	}
}

// The model refuses what the test must catch: a commit applied for a
// member that does not hold the partition, one from before the holder's
// assignment epoch, one that moves the offset back, and a refused commit
// that changed the offset.
func TestGroupLinearizableModelRejects(t *testing.T) {
	assign := porcupine.Operation{Input: linOp{kind: linAssign, member: "a", epoch: 3}, Call: 1, Output: linOut{ok: true}, Return: 2}
	commit := func(member string, epoch fence.MemberEpoch, off uint64, ok bool, at int64) porcupine.Operation {
		return porcupine.Operation{Input: linOp{kind: linCommit, member: member, epoch: epoch, offset: off}, Call: at, Output: linOut{ok: ok}, Return: at + 1}
	}
	read := func(off uint64, at int64) porcupine.Operation {
		return porcupine.Operation{Input: linOp{kind: linRead}, Call: at, Output: linOut{offset: off}, Return: at + 1}
	}
	cases := map[string][]porcupine.Operation{
		"non-holder":      {assign, commit("b", 3, 5, true, 3)},
		"before assigned": {assign, commit("a", 2, 5, true, 3)},
		"backwards":       {assign, commit("a", 3, 5, true, 3), commit("a", 3, 4, true, 5)},
		"refused applied": {assign, commit("a", 3, 5, false, 3), read(5, 5)},
	}
	for name, ops := range cases {
		if porcupine.CheckOperations(linModel, ops) {
			t.Errorf("%s: accepted", name)
		}
	}
	if !porcupine.CheckOperations(linModel, []porcupine.Operation{assign, commit("a", 4, 5, true, 3), read(5, 5)}) {
		t.Error("a valid history was refused")
	}
}
