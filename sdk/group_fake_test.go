package sdk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/wire"
)

// fakeGroupNode is a node with one group and one member, as far as a
// GroupConsumer can tell: it hands out the assignment the test sets,
// serves polls from in-memory logs with real fence tokens, and checks
// commits and polls with fence's member rule against what it holds — which
// the test can make differ from what it tells the member (a partition
// moved without the member knowing).
type fakeGroupNode struct {
	mu       sync.Mutex
	topicID  [16]byte
	member   string
	clientID string // of the latest join
	known    bool
	epoch    uint64
	assigned map[TopicPartition]uint64 // what the member is told: partition → assignment epoch
	// holds is what the owners hold for the member (default: assigned).
	holds     map[TopicPartition]uint64
	logs      map[TopicPartition][]string
	committed map[TopicPartition]uint64
	delivered map[TopicPartition]uint64 // the owners' delivered positions
	events    []string
	joins     int
	// states are the group's state stores (group_state_test.go).
	states map[TopicPartition]map[string]string
}

func newFakeGroupNode() *fakeGroupNode {
	return &fakeGroupNode{
		topicID: [16]byte{7}, assigned: map[TopicPartition]uint64{}, holds: map[TopicPartition]uint64{},
		logs: map[TopicPartition][]string{}, committed: map[TopicPartition]uint64{}, delivered: map[TopicPartition]uint64{},
	}
}

func (n *fakeGroupNode) event(format string, args ...any) {
	n.events = append(n.events, fmt.Sprintf(format, args...))
}

func (n *fakeGroupNode) takeEvents() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	e := n.events
	n.events = nil
	return e
}

// assign tells the member it holds tp from a new epoch on, and installs it.
func (n *fakeGroupNode) assign(tp TopicPartition) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.epoch++
	n.assigned[tp], n.holds[tp] = n.epoch, n.epoch
}

// revoke tells the member to give tp up; the owners keep it for the
// member until it confirms (a heartbeat without it).
func (n *fakeGroupNode) revoke(tp TopicPartition) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.assigned, tp)
}

// moveSilently takes tp from the member at the owners without telling it.
func (n *fakeGroupNode) moveSilently(tp TopicPartition) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.holds, tp)
}

// forget makes the node forget the member (a session expiry).
func (n *fakeGroupNode) forget() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.known = false
	clear(n.assigned)
	clear(n.holds)
}

func (n *fakeGroupNode) produce(tp TopicPartition, values ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.logs[tp] = append(n.logs[tp], values...)
}

func (n *fakeGroupNode) requestTimeout() time.Duration { return time.Second }
func (n *fakeGroupNode) nextID() uint32                { return 1 }
func (n *fakeGroupNode) logger() *slog.Logger          { return slog.New(slog.DiscardHandler) }

func (n *fakeGroupNode) assignment() wire.MemberAssignment {
	a := wire.MemberAssignment{MemberID: n.member, MemberEpoch: n.epoch, HeartbeatInterval: time.Second, SessionTimeout: 10 * time.Second}
	for tp, ae := range n.assigned {
		a.Assignment = append(a.Assignment, wire.AssignedPartition{Topic: tp.Topic, TopicID: n.topicID, Partition: uint32(tp.Partition), AssignmentEpoch: ae})
	}
	return a
}

func (n *fakeGroupNode) refuse(op string, s wire.Status, msg string) error {
	return &Error{Op: op, Partition: -1, Status: s, Message: msg}
}

func (n *fakeGroupNode) call(_ context.Context, req, reply wire.Message) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch m := req.(type) {
	case *wire.JoinGroupRequest:
		n.joins++
		n.member, n.clientID = m.MemberID, m.ClientID
		if n.member == "" {
			n.member = "m1"
		}
		n.known = true
		n.epoch++
		n.event("join %s", n.member)
		reply.(*wire.JoinGroupReply).MemberAssignment = n.assignment()
	case *wire.HeartbeatRequest:
		if !n.known || m.MemberID != n.member {
			return n.refuse("heartbeat", wire.StatusUnknownMember, "unknown member")
		}
		// A confirmed revocation: the owners release the partition.
		for tp := range n.holds {
			if _, told := n.assigned[tp]; !told && !ownedIn(m.Owned, tp) {
				delete(n.holds, tp)
				n.event("released %s/%d", tp.Topic, tp.Partition)
			}
		}
		reply.(*wire.HeartbeatReply).MemberAssignment = n.assignment()
	case *wire.LeaveGroupRequest:
		n.event("leave")
		n.known = false
	case *wire.CommitRequest:
		r := reply.(*wire.CommitReply)
		for _, o := range m.Offsets {
			tp := TopicPartition{Topic: o.Topic, Partition: int32(o.Partition)}
			err := n.check(m.Consumer, tp, o.Token, func(p fence.Partition, h fence.Holder, tok fence.Token) error {
				return fence.CheckCommit(p, h, tok, o.Offset, n.committed[tp])
			})
			res := wire.OffsetResult{Offset: o.Offset}
			if err != nil {
				res.Status = wire.FenceStatusBase + wire.Status(err.(*fence.Error).Code)
				res.Message = err.Error()
				n.event("commit %s/%d@%d refused: %v", tp.Topic, tp.Partition, o.Offset, err.(*fence.Error).Code)
			} else {
				n.committed[tp] = o.Offset
				n.event("commit %s/%d@%d", tp.Topic, tp.Partition, o.Offset)
			}
			r.Partitions = append(r.Partitions, res)
		}
	case *wire.GetStateRequest, *wire.CommitWithStateRequest:
		return n.stateCall(req, reply)
	default:
		return errors.New("fake: unexpected request")
	}
	return nil
}

func ownedIn(owned []wire.TopicPartition, tp TopicPartition) bool {
	for _, o := range owned {
		if o.Topic == tp.Topic && int32(o.Partition) == tp.Partition {
			return true
		}
	}
	return false
}

// facts are what the fake's owner of tp knows. Called with n.mu held.
func (n *fakeGroupNode) facts(c wire.Consumer, tp TopicPartition) (fence.Partition, fence.Holder) {
	p := fence.Partition{Topic: n.topicID, Index: uint32(tp.Partition), History: 1, HighWatermark: uint64(len(n.logs[tp]))}
	f := fence.MemberFacts{ID: fence.NameHash(c.MemberID), Known: n.known && c.MemberID == n.member, Epoch: fence.MemberEpoch(n.epoch)}
	if ae, ok := n.holds[tp]; ok && f.Known {
		f.Holds, f.AssignmentEpoch = true, fence.MemberEpoch(ae)
	}
	return p, fence.Holder{Kind: fence.HolderMember, Consumer: fence.NameHash(c.Name), Member: f}
}

func (n *fakeGroupNode) check(c wire.Consumer, tp TopicPartition, tokBytes []byte, rule func(fence.Partition, fence.Holder, fence.Token) error) error {
	tok, err := fence.UnmarshalToken(tokBytes)
	if err != nil {
		return err
	}
	p, h := n.facts(c, tp)
	return rule(p, h, tok)
}

func (n *fakeGroupNode) openStream(context.Context, int) (requestStream, int, error) {
	return &fakeGroupStream{n: n}, 1 << 20, nil
}

// fakeGroupStream answers polls at once.
type fakeGroupStream struct{ n *fakeGroupNode }

func (s *fakeGroupStream) Close(context.Context) error { return nil }

func (s *fakeGroupStream) Send(_ context.Context, frame []byte, cb func([]byte, error)) error {
	f, err := wire.ParseFrame(frame, len(frame))
	if err != nil {
		return err
	}
	var req wire.PollRequest
	if err := wire.DecodeRequest(f, &req); err != nil {
		return err
	}
	rep := s.n.poll(&req)
	out, err := wire.AppendReply(nil, f.ID, rep)
	go cb(out, err)
	return nil
}

func (n *fakeGroupNode) poll(req *wire.PollRequest) *wire.PollReply {
	n.mu.Lock()
	defer n.mu.Unlock()
	rep := &wire.PollReply{}
	for _, pp := range req.Partitions {
		tp := TopicPartition{Topic: pp.Topic, Partition: int32(pp.Partition)}
		p, h := n.facts(req.Consumer, tp)
		out := wire.PollPartitionReply{TopicID: n.topicID, History: 1, HighWatermark: p.HighWatermark}
		if err := fence.CheckMember(h.Member, fence.MemberEpoch(req.Consumer.MemberEpoch)); err != nil {
			out.Status = wire.FenceStatusBase + wire.Status(err.(*fence.Error).Code)
			n.event("poll %s/%d refused: %v", tp.Topic, tp.Partition, err.(*fence.Error).Code)
			rep.Partitions = append(rep.Partitions, out)
			continue
		}
		from := pp.Position.Offset
		if pp.Position.Mode == wire.PositionNext {
			from = n.committed[tp]
			if d, ok := n.delivered[tp]; ok {
				from = d
			}
		}
		log := n.logs[tp]
		tok := fence.Issue(p, h, from).Through(uint64(len(log)))
		var b record.BatchBuilder
		for _, v := range log[from:] {
			b.Append(record.Record{Timestamp: 1, Value: []byte(v)})
		}
		if from < uint64(len(log)) {
			batch, _ := b.Build(record.CompressionNone)
			record.StampBaseOffset(batch, from)
			out.Batches = batch
		}
		out.Next = uint64(len(log))
		out.Token, _ = tok.MarshalBinary()
		n.delivered[tp] = out.Next
		if req.AutoCommit == wire.AutoCommitOnDelivery && out.Next > from {
			n.committed[tp] = out.Next
			n.event("commit on delivery %s/%d@%d", tp.Topic, tp.Partition, out.Next)
		}
		rep.Partitions = append(rep.Partitions, out)
	}
	return rep
}
