package group

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

var groupSeeds = flag.Int("seeds", 100, "seeds of TestGroupRandomized")

// groupSim drives a group of simulated members through joins, leaves,
// heartbeats (prompt, slow, lost), pauses past the session timeout, polls,
// commits (prompt and late), and node restarts, one synchronous step at a
// time, and checks after every step:
//
//   - no offset committed by a non-holder is applied: an accepted commit
//     came from the member the coordinator has holding the partition;
//   - the owners hold what the coordinator says they hold, with the same
//     assignment epochs;
//   - no committed offset moves backwards;
//   - at most one member holds a token the owner would accept, per
//     partition;
//   - member epochs never repeat, not even across a restart.
type groupSim struct {
	t   testing.TB
	rnd *rand.Rand
	w   *groupWorld
	ctx context.Context
	// clients by member id; a client rejoins under its id after a fence.
	clients map[string]*simClient
	// tokens are the latest tokens each member id got, per partition.
	tokens map[int]map[string]fence.Token
	// late are commits computed earlier and sent later.
	late []lateCommit
	// committed is the highest committed offset seen per partition since
	// the last restart; acked the highest one acknowledged as durable.
	committed, acked map[int]uint64
	// maxEpoch is the highest epoch handed out; after a restart every new
	// epoch must be above the highest before it.
	maxEpoch, floor fence.MemberEpoch
	log             []string
}

type simClient struct {
	id     string
	joined bool
	epoch  fence.MemberEpoch
	owns   []wire.TopicPartition
	paused bool
}

type lateCommit struct {
	member string
	tok    fence.Token
	offset uint64
}

const simPartitions = 4

func newGroupSim(t testing.TB, seed uint64) *groupSim {
	s := &groupSim{
		t: t, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), w: newGroupWorld(t), ctx: context.Background(),
		clients: map[string]*simClient{}, tokens: map[int]map[string]fence.Token{}, committed: map[int]uint64{}, acked: map[int]uint64{},
	}
	s.w.createTopic("t", simPartitions)
	for p := range simPartitions {
		s.tokens[p] = map[string]fence.Token{}
		vals := make([]string, 50)
		for i := range vals {
			vals[i] = fmt.Sprintf("v%d", i)
		}
		s.w.produce("t", p, vals...)
	}
	for i := range 4 {
		id := fmt.Sprintf("c%d", i)
		s.clients[id] = &simClient{id: id}
	}
	return s
}

func (s *groupSim) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf(format, args...))
	if len(s.log) > 40 {
		s.log = s.log[1:]
	}
}

func (s *groupSim) fail(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s\nlast steps:\n  %s", fmt.Sprintf(format, args...), joinLines(s.log))
}

func joinLines(l []string) string {
	out := ""
	for i, s := range l {
		if i > 0 {
			out += "\n  "
		}
		out += s
	}
	return out
}

func (s *groupSim) pick() *simClient {
	ids := sortedKeys(s.clients)
	return s.clients[ids[s.rnd.IntN(len(ids))]]
}

func (s *groupSim) step() {
	c := s.pick()
	switch r := s.rnd.IntN(100); {
	case r < 8:
		s.join(c)
	case r < 11:
		if c.joined {
			s.logf("%s leaves", c.id)
			if err := s.w.groups.Leave(s.ctx, "g", c.id, c.epoch); err != nil {
				s.fail("leave: %v", err)
			}
			c.joined, c.owns = false, nil
		}
	case r < 40:
		s.heartbeat(c, s.rnd.IntN(4) == 0)
	case r < 45:
		c.paused = !c.paused
		s.logf("%s paused=%v", c.id, c.paused)
	case r < 70:
		s.poll(c)
	case r < 85:
		s.commit(c)
	case r < 92:
		s.sendLate()
	case r < 99:
		d := time.Duration(s.rnd.IntN(4000)) * time.Millisecond
		s.w.clock.Advance(d)
		s.logf("advance %v", d)
		// The members that are not paused heartbeat on time.
		for _, id := range sortedKeys(s.clients) {
			if cl := s.clients[id]; cl.joined && !cl.paused && s.rnd.IntN(3) > 0 {
				s.heartbeat(cl, false)
			}
		}
		if err := s.w.groups.Expire(s.ctx); err != nil {
			s.fail("expire: %v", err)
		}
	default:
		s.logf("restart")
		s.w.restart()
		s.floor = s.maxEpoch
		// Commits on next poll are not synced: a restart may take the
		// committed offset back to the last acknowledged one.
		for p := range simPartitions {
			off, _ := s.w.committed("g", "t", p)
			if off < s.acked[p] {
				s.fail("t/%d committed offset %d after restart is below the acknowledged %d", p, off, s.acked[p])
			}
			s.committed[p] = off
		}
		for _, cl := range s.clients {
			cl.owns = nil // the connection is gone; the client will find out
		}
	}
	s.check()
}

func (s *groupSim) join(c *simClient) {
	a, err := s.w.groups.Join(s.ctx, JoinRequest{Group: "g", Member: c.id, Topics: []string{"t"},
		Assignor: wire.GroupAssignor(1 + s.rnd.IntN(2))})
	if err != nil {
		s.fail("join: %v", err)
	}
	s.logf("%s joins: epoch %d", c.id, a.MemberEpoch)
	c.joined, c.paused, c.owns = true, false, nil
	s.took(c, a, false)
}

func (s *groupSim) heartbeat(c *simClient, slow bool) {
	if !c.joined || c.paused {
		return
	}
	a, err := s.w.groups.Heartbeat(s.ctx, HeartbeatRequest{Group: "g", Member: c.id, Epoch: c.epoch, Owned: c.owns})
	if err != nil {
		s.logf("%s heartbeat: %v", c.id, err)
		if a, ok := fence.ActionOf(err); !ok || a != fence.Rejoin {
			s.fail("heartbeat refused with %v", err)
		}
		// Lost: drop everything, rejoin.
		c.joined, c.owns = false, nil
		s.join(c)
		return
	}
	s.logf("%s heartbeat: epoch %d, %d partitions", c.id, a.MemberEpoch, len(a.Assignment))
	s.took(c, a, slow)
}

func (s *groupSim) took(c *simClient, a wire.MemberAssignment, slow bool) {
	e := fence.MemberEpoch(a.MemberEpoch)
	if e <= s.floor && e != c.epoch {
		s.fail("%s got epoch %d after a restart, not above %d", c.id, e, s.floor)
	}
	s.maxEpoch = max(s.maxEpoch, e)
	c.epoch = e
	var now []wire.TopicPartition
	for _, p := range a.Assignment {
		now = append(now, wire.TopicPartition{Topic: p.Topic, Partition: p.Partition})
	}
	if slow {
		for _, o := range c.owns {
			if !slices.Contains(now, o) {
				now = append(now, o)
			}
		}
	}
	c.owns = now
}

func (s *groupSim) poll(c *simClient) {
	if !c.joined || len(c.owns) == 0 {
		return
	}
	tp := c.owns[s.rnd.IntN(len(c.owns))]
	o := s.w.topics.topic("t").owners[tp.Partition]
	auto := owner.AutoCommit(s.rnd.IntN(3))
	res, err := o.Poll(s.ctx, owner.PollRequest{
		Consumer: owner.Consumer{Name: "g", Member: c.id, MemberEpoch: c.epoch},
		From:     owner.FromNext, MaxBytes: 1 + s.rnd.IntN(200), AutoCommit: auto,
	})
	s.logf("%s polls t/%d (auto %d): %v", c.id, tp.Partition, auto, errOr(err, fmt.Sprint(res.Token)))
	if err != nil {
		return
	}
	if auto == owner.AutoCommitOnDelivery && res.Token.Next > res.Token.From {
		s.checkHolder(int(tp.Partition), c.id, "commit on delivery")
		s.acked[int(tp.Partition)] = max(s.acked[int(tp.Partition)], res.Token.Next)
	}
	s.tokens[int(tp.Partition)][c.id] = res.Token
	if s.rnd.IntN(3) == 0 {
		s.late = append(s.late, lateCommit{member: c.id, tok: res.Token, offset: res.Token.Next})
	}
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

func (s *groupSim) commit(c *simClient) {
	for p := range simPartitions {
		tok, ok := s.tokens[p][c.id]
		if ok && s.rnd.IntN(2) == 0 {
			s.apply(c.id, tok, tok.Next)
			return
		}
	}
}

func (s *groupSim) sendLate() {
	if len(s.late) == 0 {
		return
	}
	i := s.rnd.IntN(len(s.late))
	l := s.late[i]
	s.late = slices.Delete(s.late, i, i+1)
	s.apply(l.member, l.tok, l.offset)
}

// apply sends a commit as the member whose token it carries, with the
// epoch the client believes it has now.
func (s *groupSim) apply(member string, tok fence.Token, offset uint64) {
	o := s.w.topics.topic("t").owners[tok.Partition]
	epoch := s.clients[member].epoch
	err := o.Commit(s.ctx, owner.CommitRequest{Consumer: owner.Consumer{Name: "g", Member: member, MemberEpoch: epoch}, Token: tok, Offset: offset})
	s.logf("%s commits t/%d@%d (token epoch %d, assigned %d): %v", member, tok.Partition, offset, tok.MemberEpoch, tok.AssignmentEpoch, errOr(err, "ok"))
	if err == nil {
		s.checkHolder(int(tok.Partition), member, "commit")
		s.acked[int(tok.Partition)] = max(s.acked[int(tok.Partition)], offset)
		return
	}
	if _, ok := fence.CodeOf(err); !ok && !errors.Is(err, owner.ErrNoConsumer) {
		s.fail("commit failed with a non-fence error: %v", err)
	}
}

// checkHolder: the member whose commit was just applied holds the
// partition in the coordinator.
func (s *groupSim) checkHolder(p int, member, what string) {
	s.w.groups.mu.Lock()
	defer s.w.groups.mu.Unlock()
	g := s.w.groups.groups["g"]
	gp := groupPartition{topic: "t", id: s.w.topics.topic("t").id, index: uint32(p)}
	if h := g.holder[gp]; h != member {
		s.fail("%s of t/%d by %s applied, but the coordinator has %q holding it", what, p, member, h)
	}
}

func (s *groupSim) check() {
	tt := s.w.topics.topic("t")
	gs := s.w.groups
	gs.mu.Lock()
	g := gs.groups["g"]
	if g != nil {
		for id, m := range g.members {
			if m.epoch > g.epoch {
				s.fail("member %s at epoch %d ahead of the group's %d", id, m.epoch, g.epoch)
			}
			for p, ae := range m.held {
				if g.holder[p] != id {
					s.fail("%s holds %v, the coordinator says %q", id, p, g.holder[p])
				}
				if ae > m.epoch {
					s.fail("%s holds %v at assignment epoch %d above its epoch %d", id, p, ae, m.epoch)
				}
			}
			if known, e := gs.Member("g", id); !known || e != m.epoch {
				s.fail("view of %s: known=%v epoch %d, want epoch %d", id, known, e, m.epoch)
			}
		}
	}
	for p, o := range tt.owners {
		gp := groupPartition{topic: "t", id: tt.id, index: uint32(p)}
		var a, want struct {
			member          string
			assignmentEpoch fence.MemberEpoch
		}
		var installed bool
		a.member, a.assignmentEpoch, installed = o.Assignment("g")
		held := false
		if g != nil {
			if id, ok := g.holder[gp]; ok {
				held = true
				want.member, want.assignmentEpoch = id, g.members[id].held[gp]
			}
		}
		if installed != held || installed && a != want {
			s.fail("owner of t/%d has %+v (%v), the coordinator %+v (%v)", p, a, installed, want, held)
		}
	}
	gs.mu.Unlock()

	for p := range simPartitions {
		off, ok := s.w.committed("g", "t", p)
		if ok {
			if off < s.committed[p] {
				s.fail("t/%d committed offset went back from %d to %d", p, s.committed[p], off)
			}
			s.committed[p] = off
		}
		if valid := validTokens(tt.owners[p], "g", s.tokens[p]); len(valid) > 1 {
			s.fail("t/%d: members %v hold valid tokens at once", p, valid)
		}
	}
}

func TestGroupRandomized(t *testing.T) {
	for seed := range uint64(*groupSeeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := newGroupSim(t, seed)
			for range 400 {
				s.step()
			}
		})
	}
}
