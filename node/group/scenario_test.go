package group

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/transport/wire"
)

// Group scenarios (testdata): a coordinator over in-memory topics and
// real partition owners. Members are simulated clients: each remembers
// the epoch and assignment of its last reply and what it owns; a
// heartbeat reports what it owns and then gives up what the reply
// revoked (slow: it keeps it). Polls run the owner's poll lifecycle and
// can be suspended at their read, as in testdata/owner.
//
// Commands:
//
//	topic name=T partitions=N
//	join member=M [group=G] [topics=(T,...)] [assignor=range|round-robin] [session=D] [rebalance=D]
//	heartbeat member=M [slow] [epoch=N]
//	leave member=M
//	advance by=D           move the clock (nothing expires until expire or the next step)
//	expire
//	describe
//	produce [topic=T] partition=P count=N     one batch per record, values rO (O = offset)
//	poll member=M [topic=T] partition=P as=X [max=1] [auto=delivery|next-poll] [epoch=N] [suspend]
//	resume as=X | await as=X
//	commit member=M token=X offset=N [epoch=N]
//	committed [topic=T] partition=P
//	restart
type groupScenario struct {
	t       testing.TB
	ctx     context.Context
	w       *groupWorld
	members map[string]*simMember
	tokens  map[string]fence.Token
	polls   map[string]*groupPoll
}

// simMember is what a client knows of its membership.
type simMember struct {
	group string
	epoch fence.MemberEpoch
	owns  []wire.TopicPartition
}

type groupPoll struct {
	gate  *ownertest.ReadGate
	done  chan struct{}
	topic string
	part  int
	res   owner.PollResult
	err   error
}

func (s *groupScenario) run(d *datadriven.TestData) string {
	t := s.t
	switch d.Cmd {
	case "topic":
		var name string
		var n int
		d.ScanArgs(t, "name", &name)
		d.ScanArgs(t, "partitions", &n)
		s.w.createTopic(name, n)
		return "ok"
	case "join":
		var id string
		d.ScanArgs(t, "member", &id)
		req := JoinRequest{Group: "g", Member: id, Topics: []string{"t"}}
		d.MaybeScanArgs(t, "group", &req.Group)
		if arg, ok := d.Arg("topics"); ok {
			req.Topics = arg.Vals
		}
		var a string
		if d.MaybeScanArgs(t, "assignor", &a) {
			req.Assignor = map[string]wire.GroupAssignor{"range": wire.AssignorRange, "round-robin": wire.AssignorRoundRobin}[a]
		}
		req.SessionTimeout = s.duration(d, "session")
		req.RebalanceTimeout = s.duration(d, "rebalance")
		res, err := s.w.groups.Join(s.ctx, req)
		if err != nil {
			return ownertest.RenderErr(err)
		}
		sm := &simMember{group: req.Group}
		s.members[id] = sm
		return s.took(id, sm, res, false)
	case "heartbeat":
		id, sm := s.member(d)
		epoch := sm.epoch
		if d.HasArg("epoch") {
			var e uint64
			d.ScanArgs(t, "epoch", &e)
			epoch = fence.MemberEpoch(e)
		}
		res, err := s.w.groups.Heartbeat(s.ctx, HeartbeatRequest{Group: sm.group, Member: id, Epoch: epoch, Owned: sm.owns})
		if err != nil {
			return ownertest.RenderErr(err)
		}
		return s.took(id, sm, res, d.HasArg("slow"))
	case "leave":
		id, sm := s.member(d)
		if err := s.w.groups.Leave(s.ctx, sm.group, id, sm.epoch); err != nil {
			return ownertest.RenderErr(err)
		}
		delete(s.members, id)
		return "ok"
	case "advance":
		dur := s.duration(d, "by")
		s.w.clock.Advance(dur)
		return "advanced " + dur.String()
	case "expire":
		if err := s.w.groups.Expire(s.ctx); err != nil {
			return ownertest.RenderErr(err)
		}
		return s.describe("g")
	case "describe":
		g := "g"
		d.MaybeScanArgs(t, "group", &g)
		return s.describe(g)
	case "produce":
		topic, part := s.partition(d)
		var n int
		d.ScanArgs(t, "count", &n)
		st := s.w.topics.topic(topic).logs[part].State()
		for i := range n {
			s.w.produce(topic, part, fmt.Sprintf("r%d", st.HighWatermark+uint64(i)))
		}
		return fmt.Sprintf("appended %d-%d", st.HighWatermark, st.HighWatermark+uint64(n)-1)
	case "poll":
		return s.poll(d)
	case "resume":
		p := s.poll1(d)
		if p.gate == nil {
			t.Fatalf("%s: poll was not suspended", d.Pos)
		}
		close(p.gate.Release)
		return s.await(d)
	case "await":
		return s.await(d)
	case "commit":
		id, sm := s.member(d)
		var tokName string
		var off uint64
		d.ScanArgs(t, "token", &tokName)
		d.ScanArgs(t, "offset", &off)
		tok, ok := s.tokens[tokName]
		if !ok {
			t.Fatalf("%s: no token %q", d.Pos, tokName)
		}
		c := owner.Consumer{Name: sm.group, Member: id, MemberEpoch: s.epoch(d, sm)}
		o := s.ownerOfToken(tok)
		if err := o.Commit(s.ctx, owner.CommitRequest{Consumer: c, Token: tok, Offset: off}); err != nil {
			return ownertest.RenderErr(err)
		}
		return "ok"
	case "committed":
		topic, part := s.partition(d)
		off, ok := s.w.committed("g", topic, part)
		if !ok {
			return "no commit"
		}
		o := s.w.topics.GroupOffset(topic, uint32(part), "g")
		return fmt.Sprintf("committed %d@h%d, resumes at %d", o.Offset, o.History, off)
	case "restart":
		if len(s.polls) > 0 {
			t.Fatalf("%s: polls in flight at restart", d.Pos)
		}
		s.w.restart()
		return "restarted"
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}

func (s *groupScenario) duration(d *datadriven.TestData, key string) time.Duration {
	var v string
	if !d.MaybeScanArgs(s.t, key, &v) {
		return 0
	}
	dur, err := time.ParseDuration(v)
	if err != nil {
		s.t.Fatalf("%s: %s=%q: %v", d.Pos, key, v, err)
	}
	return dur
}

func (s *groupScenario) member(d *datadriven.TestData) (string, *simMember) {
	var id string
	d.ScanArgs(s.t, "member", &id)
	sm := s.members[id]
	if sm == nil {
		s.t.Fatalf("%s: no member %q", d.Pos, id)
	}
	return id, sm
}

func (s *groupScenario) epoch(d *datadriven.TestData, sm *simMember) fence.MemberEpoch {
	if d.HasArg("epoch") {
		var e uint64
		d.ScanArgs(s.t, "epoch", &e)
		return fence.MemberEpoch(e)
	}
	return sm.epoch
}

func (s *groupScenario) partition(d *datadriven.TestData) (string, int) {
	topic := "t"
	d.MaybeScanArgs(s.t, "topic", &topic)
	var p int
	d.ScanArgs(s.t, "partition", &p)
	return topic, p
}

func (s *groupScenario) ownerOfToken(tok fence.Token) *owner.Owner {
	for _, t := range s.w.topics.topics {
		if t.id == tok.Topic {
			return t.owners[tok.Partition]
		}
	}
	s.t.Fatalf("no topic for token %v", tok)
	return nil
}

// took records a reply: the member adopts its epoch; it gives up what the
// reply revoked unless it is slow, and takes what is new.
func (s *groupScenario) took(id string, sm *simMember, a wire.MemberAssignment, slow bool) string {
	sm.epoch = fence.MemberEpoch(a.MemberEpoch)
	var now []wire.TopicPartition
	var assigned []string
	for _, p := range a.Assignment {
		tp := wire.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		now = append(now, tp)
		assigned = append(assigned, fmt.Sprintf("%s/%d@%d", p.Topic, p.Partition, p.AssignmentEpoch))
	}
	var revoked, added []string
	for _, o := range sm.owns {
		if !slices.Contains(now, o) {
			revoked = append(revoked, fmt.Sprintf("%s/%d", o.Topic, o.Partition))
		}
	}
	for _, n := range now {
		if !slices.Contains(sm.owns, n) {
			added = append(added, fmt.Sprintf("%s/%d", n.Topic, n.Partition))
		}
	}
	if slow {
		for _, o := range sm.owns {
			if !slices.Contains(now, o) {
				now = append(now, o)
			}
		}
	}
	sm.owns = now
	out := fmt.Sprintf("%s epoch %d: %s", id, a.MemberEpoch, orNone(assigned))
	if len(added) > 0 {
		out += "; new " + strings.Join(added, " ")
	}
	if len(revoked) > 0 {
		out += "; revoke " + strings.Join(revoked, " ")
		if slow {
			out += " (not yet)"
		}
	}
	return out
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, " ")
}

func (s *groupScenario) describe(name string) string {
	d := s.w.groups.Describe(name)
	var sb strings.Builder
	fmt.Fprintf(&sb, "group %s epoch %d %s %s\n", d.Group, d.GroupEpoch, d.State, d.Assignor)
	for _, m := range d.Members {
		var held []string
		for _, p := range m.Assignment {
			held = append(held, fmt.Sprintf("%s/%d@%d", p.Topic, p.Partition, p.AssignmentEpoch))
		}
		fmt.Fprintf(&sb, "  %s epoch %d holds %s", m.MemberID, m.MemberEpoch, orNone(held))
		if len(m.Revoking) > 0 {
			fmt.Fprintf(&sb, "; revoking %s", renderTPs(m.Revoking))
		}
		if len(m.Pending) > 0 {
			fmt.Fprintf(&sb, "; pending %s", renderTPs(m.Pending))
		}
		sb.WriteString("\n")
	}
	for _, o := range d.Offsets {
		holder := o.MemberID
		if holder == "" {
			holder = "-"
		}
		c := "none"
		if o.HasOffset {
			c = fmt.Sprintf("%d@h%d", o.Offset, o.History)
		}
		fmt.Fprintf(&sb, "  %s/%d committed %s lag %d holder %s\n", o.Topic, o.Partition, c, o.HighWatermark-o.Resolved, holder)
	}
	return strings.TrimSuffix(sb.String(), "\n")
}

func renderTPs(ps []wire.TopicPartition) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s/%d", p.Topic, p.Partition))
	}
	return strings.Join(out, " ")
}

func (s *groupScenario) poll(d *datadriven.TestData) string {
	t := s.t
	id, sm := s.member(d)
	topic, part := s.partition(d)
	var as, auto string
	d.ScanArgs(t, "as", &as)
	req := owner.PollRequest{
		Consumer: owner.Consumer{Name: sm.group, Member: id, MemberEpoch: s.epoch(d, sm)},
		From:     owner.FromNext,
	}
	if d.HasArg("max") {
		req.MaxBytes = 1 // at least one batch: one record
	}
	if d.MaybeScanArgs(t, "auto", &auto) {
		req.AutoCommit = map[string]owner.AutoCommit{"delivery": owner.AutoCommitOnDelivery, "next-poll": owner.AutoCommitOnNextPoll}[auto]
	}
	tt := s.w.topics.topic(topic)
	p := &groupPoll{done: make(chan struct{}), topic: topic, part: part}
	if d.HasArg("suspend") {
		p.gate = suspendRead(tt.logs[part])
	}
	o := tt.owners[part]
	go func() {
		defer close(p.done)
		p.res, p.err = o.Poll(s.ctx, req)
	}()
	synctest.Wait()
	select {
	case <-p.done:
		if p.gate != nil {
			t.Fatalf("%s: poll finished without reaching its read", d.Pos)
		}
		if p.err == nil {
			s.tokens[as] = p.res.Token
		}
		return renderGroupPoll(p.res, p.err)
	default:
	}
	s.polls[as] = p
	if p.gate == nil {
		t.Fatalf("%s: poll blocked", d.Pos)
	}
	<-p.gate.Arrived
	return "suspended at the file read"
}

// suspendRead makes the log's next read block at its file read.
func suspendRead(l *ownertest.Log) *ownertest.ReadGate {
	return l.SuspendNextRead()
}

func (s *groupScenario) poll1(d *datadriven.TestData) *groupPoll {
	var as string
	d.ScanArgs(s.t, "as", &as)
	p := s.polls[as]
	if p == nil {
		s.t.Fatalf("%s: no poll %q in flight", d.Pos, as)
	}
	return p
}

func (s *groupScenario) await(d *datadriven.TestData) string {
	var as string
	d.ScanArgs(s.t, "as", &as)
	p := s.poll1(d)
	synctest.Wait()
	select {
	case <-p.done:
	default:
		return "still in flight"
	}
	delete(s.polls, as)
	if p.err == nil {
		s.tokens[as] = p.res.Token
	}
	return renderGroupPoll(p.res, p.err)
}

func renderGroupPoll(r owner.PollResult, err error) string {
	out := ownertest.RenderPoll(r, err)
	if err != nil {
		return out
	}
	return out + fmt.Sprintf(" epoch %d assigned %d", r.Token.MemberEpoch, r.Token.AssignmentEpoch)
}

func TestGroupScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			s := &groupScenario{
				t: t, ctx: ctx, w: newGroupWorld(t),
				members: map[string]*simMember{}, tokens: map[string]fence.Token{}, polls: map[string]*groupPoll{},
			}
			t.Cleanup(func() {
				for name, p := range s.polls {
					if p.gate != nil {
						close(p.gate.Release)
					}
					t.Errorf("poll %s still in flight at the end of the scenario", name)
				}
				cancel()
				synctest.Wait()
			})
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				s.t = t
				s.w.t = t
				return s.run(d)
			})
		})
	})
}
