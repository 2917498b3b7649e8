package kafka

import (
	"context"
	"reflect"
	"slices"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetCommit sets a classic member's committed offsets. Kafka's commit
// stores the offset it is given, so it is Ledge's reset (it may go
// backwards), fenced by the owner like every commit: the token carries
// the member's generation as its member epoch, which must lie between
// the partition's assignment epoch and the member's epoch, and the
// committed leader epoch as its history epoch, which must be the
// partition's (a commit from before a purge is refused with
// FENCED_LEADER_EPOCH). A client that sends no leader epoch (-1) commits
// in the history current when the commit is read.
//
// A negative offset is "no position", as Kafka stores it: a member of the
// group at the generation it states, on a partition it was assigned, may
// commit it, and OffsetFetch returns -1 until the group commits an offset
// again (the client then resets per its own policy).
func (cc *conn) offsetCommit(ctx context.Context, m *kmsg.OffsetCommitRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.OffsetCommitResponse)
	fail := func(code int16) kmsg.Response {
		for _, t := range m.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	if m.MemberID == "" || m.Generation < 0 {
		// Commits from outside the group's membership have no epoch
		// to be fenced by.
		return fail(kerr.UnknownMemberID.Code)
	}
	consumer := wire.Consumer{Kind: wire.ConsumerMember, Name: m.Group, MemberID: m.MemberID, MemberEpoch: uint64(m.Generation)}
	req := &wire.ResetPositionRequest{Consumer: consumer}
	type slot struct{ t, p int }
	var where []slot
	// At most MaxRequestElements partitions (less the topics) are
	// committed; the others are answered REQUEST_TIMED_OUT, which a
	// client retries: franz-go commits from a map, so its next commit
	// names them in another order.
	commit := max(cc.s.cfg.MaxRequestElements-len(m.Topics), 1)
	past := 0
	r.Topics = make([]kmsg.OffsetCommitResponseTopic, len(m.Topics))
	for i, t := range m.Topics {
		rt := &r.Topics[i]
		*rt = kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		var d *wire.DescribeTopicReply
		var derr error
		if commit > 0 {
			d, derr = cc.sess.DescribeTopic(ctx, &wire.DescribeTopicRequest{Name: t.Topic})
		}
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			if commit == 0 {
				rp.ErrorCode = kerr.RequestTimedOut.Code
				past++
				continue
			}
			commit--
			switch {
			case derr != nil:
				rp.ErrorCode = codeOf(derr)
				continue
			case p.Partition < 0 || int(p.Partition) >= len(d.Partitions):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			case p.Offset < 0:
				rp.ErrorCode = cc.commitNoPosition(ctx, m, t.Topic, p.Partition)
				continue
			}
			history := fence.HistoryEpoch(d.Partitions[p.Partition].History)
			if p.LeaderEpoch >= 0 {
				history = fence.HistoryEpoch(p.LeaderEpoch)
			}
			off := uint64(p.Offset)
			tok, _ := fence.Token{
				Topic: d.Topic.ID, Partition: uint32(p.Partition), History: history,
				Kind: fence.HolderMember, Consumer: fence.NameHash(m.Group),
				Member: fence.NameHash(m.MemberID), MemberEpoch: fence.MemberEpoch(m.Generation),
				From: off, Next: off,
			}.MarshalBinary()
			req.Partitions = append(req.Partitions, wire.ResetPartition{
				Topic: t.Topic, Partition: uint32(p.Partition),
				Position: wire.Position{Mode: wire.PositionOffset, Offset: off}, Token: tok,
			})
			where = append(where, slot{i, j})
		}
	}
	if past > 0 {
		cc.refusedOnce("offset_commit", countElements(reflect.ValueOf(m)), cc.s.cfg.MaxRequestElements-len(m.Topics))
	}
	if len(req.Partitions) == 0 {
		return r
	}
	rep, err := cc.sess.ResetPosition(ctx, req)
	for k, w := range where {
		rp := &r.Topics[w.t].Partitions[w.p]
		switch {
		case err != nil:
			rp.ErrorCode = commitCode(wire.StatusOf(err))
		case k < len(rep.Partitions):
			rp.ErrorCode = commitCode(rep.Partitions[k].Status)
		}
		if rp.ErrorCode == 0 {
			cc.s.groups.setUnset(unsetKey{m.Group, m.Topics[w.t].Topic, rp.Partition}, false)
		}
	}
	return r
}

// commitNoPosition records a commit of a negative offset, and returns its
// error code. The member must hold the generation it states and the
// partition (assigned to it, or owned by its own account), and its token
// the consume scope on the topic.
func (cc *conn) commitNoPosition(ctx context.Context, m *kmsg.OffsetCommitRequest, topic string, partition int32) int16 {
	cm, ok := cc.s.groups.get(m.Group, m.MemberID)
	switch {
	case !ok:
		return kerr.UnknownMemberID.Code
	case cm.epoch != uint64(m.Generation):
		return kerr.IllegalGeneration.Code
	}
	tp := wire.TopicPartition{Topic: topic, Partition: uint32(partition)}
	if !slices.Contains(cm.synced, tp) && !slices.Contains(cm.owned, tp) {
		return kerr.IllegalGeneration.Code
	}
	if err := cc.sess.Authorize(ctx, topic, partition, wire.ScopeConsume); err != nil {
		return commitCode(wire.StatusOf(err))
	}
	cc.s.groups.setUnset(unsetKey{m.Group, topic, partition}, true)
	return 0
}

// commitCode maps a fenced commit to what a classic member acts on.
func commitCode(s wire.Status) int16 {
	switch s {
	case wire.StatusUnknownMember:
		return kerr.UnknownMemberID.Code
	case wire.StatusForbidden:
		return kerr.GroupAuthorizationFailed.Code
	}
	return codeOfStatus(s)
}

// offsetFetch returns a group's committed offsets, each resolved in its
// partition's current history: an offset committed before a purge reads
// as the new start, never as "no offset" (a consumer that resets to the
// end would skip what was written since).
func (cc *conn) offsetFetch(ctx context.Context, m *kmsg.OffsetFetchRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.OffsetFetchResponse)
	topics := m.Topics
	if topics == nil {
		list, err := cc.sess.ListTopics(ctx)
		if err != nil {
			r.ErrorCode = codeOf(err)
			return r
		}
		for _, t := range list.Topics {
			ot := kmsg.NewOffsetFetchRequestTopic()
			ot.Topic = t.Name
			for p := uint32(0); p < t.Config.Partitions; p++ {
				ot.Partitions = append(ot.Partitions, int32(p))
			}
			topics = append(topics, ot)
		}
	}
	var tps []wire.TopicPartition
	for _, t := range topics {
		for _, p := range t.Partitions {
			tps = append(tps, wire.TopicPartition{Topic: t.Topic, Partition: uint32(max(p, 0))})
		}
	}
	offsets, err := cc.sess.GroupOffsets(ctx, m.Group, tps)
	if err != nil {
		r.ErrorCode = groupCode(err)
		return r
	}
	k := 0
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			o := offsets[k]
			k++
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
			switch {
			case o.Status != wire.StatusOK:
				rp.ErrorCode = codeOfStatus(o.Status)
			case cc.s.groups.isUnset(unsetKey{m.Group, t.Topic, p}):
				// -1: the group committed "no position" last.
			case o.HasOffset:
				rp.Offset = int64(o.Resolved)
			}
			if m.Topics == nil && rp.Offset < 0 {
				continue
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		if m.Topics == nil && len(rt.Partitions) == 0 {
			continue
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}

func (cc *conn) describeGroups(ctx context.Context, m *kmsg.DescribeGroupsRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range m.Groups {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group, g.ProtocolType = name, "consumer"
		d, err := cc.sess.DescribeGroup(ctx, &wire.DescribeGroupRequest{Group: name})
		if err != nil {
			g.ErrorCode = groupCode(err)
			if wire.StatusOf(err) == wire.StatusInvalidArgument {
				g.ErrorCode, g.State = 0, "Dead"
			}
			r.Groups = append(r.Groups, g)
			continue
		}
		g.State = groupState(d.State)
		g.Protocol = "range"
		for _, mm := range d.Members {
			gm := kmsg.NewDescribeGroupsResponseGroupMember()
			gm.MemberID = mm.MemberID
			var meta kmsg.ConsumerMemberMetadata
			meta.Topics = mm.Topics
			gm.ProtocolMetadata = meta.AppendTo(nil)
			gm.MemberAssignment = encodeAssignment(mm.Assignment)
			g.Members = append(g.Members, gm)
		}
		r.Groups = append(r.Groups, g)
	}
	return r
}

func (cc *conn) listGroups(ctx context.Context, m *kmsg.ListGroupsRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.ListGroupsResponse)
	list, err := cc.sess.ListGroups(ctx)
	if err != nil {
		r.ErrorCode = groupCode(err)
		return r
	}
	for _, s := range list.Groups {
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState = s.Group, "consumer", groupState(s.State)
		r.Groups = append(r.Groups, g)
	}
	return r
}

// groupState names a Ledge group state as the classic protocol does.
func groupState(s wire.GroupState) string {
	switch s {
	case wire.GroupEmpty:
		return "Empty"
	case wire.GroupReconciling:
		return "PreparingRebalance"
	}
	return "Stable"
}
