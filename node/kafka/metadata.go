package kafka

import (
	"context"

	"github.com/ledgemq/ledge/transport/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic administration and cluster metadata: one broker (this node) leads
// every partition; a partition's leader epoch is its history epoch.

func (cc *conn) metadata(ctx context.Context, m *kmsg.MetadataRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.MetadataResponse)
	host, port := cc.advertised()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = nodeID, host, port
	r.Brokers = []kmsg.MetadataResponseBroker{b}
	r.ClusterID = &cc.s.cfg.ClusterID
	r.ControllerID = nodeID
	var names []string
	if m.Topics == nil {
		list, err := cc.sess.ListTopics(ctx)
		if err == nil {
			for _, t := range list.Topics {
				names = append(names, t.Name)
			}
		}
	} else {
		for _, t := range m.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			}
		}
	}
	for _, name := range names {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		d, err := cc.sess.DescribeTopic(ctx, &wire.DescribeTopicRequest{Name: name})
		if err != nil {
			rt.ErrorCode = codeOf(err)
			r.Topics = append(r.Topics, rt)
			continue
		}
		rt.TopicID = d.Topic.ID
		for _, ps := range d.Partitions {
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition = int32(ps.Partition)
			p.Leader = nodeID
			p.LeaderEpoch = leaderEpoch(ps.History)
			p.Replicas, p.ISR = []int32{nodeID}, []int32{nodeID}
			p.ErrorCode = codeOfStatus(ps.Status)
			rt.Partitions = append(rt.Partitions, p)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}

func (cc *conn) findCoordinator(m *kmsg.FindCoordinatorRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.FindCoordinatorResponse)
	host, port := cc.advertised()
	if m.CoordinatorType != 0 { // transactions
		r.ErrorCode = kerr.CoordinatorNotAvailable.Code
		for _, k := range m.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.ErrorCode = k, kerr.CoordinatorNotAvailable.Code
			r.Coordinators = append(r.Coordinators, c)
		}
		return r
	}
	r.NodeID, r.Host, r.Port = nodeID, host, port
	for _, k := range m.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port = k, nodeID, host, port
		r.Coordinators = append(r.Coordinators, c)
	}
	return r
}

func (cc *conn) createTopics(ctx context.Context, m *kmsg.CreateTopicsRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range m.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		partitions := t.NumPartitions
		if partitions <= 0 {
			partitions = 1
		}
		switch {
		case len(t.ReplicaAssignment) > 0:
			rt.ErrorCode = kerr.InvalidReplicaAssignment.Code
		case m.ValidateOnly:
			if _, err := cc.sess.DescribeTopic(ctx, &wire.DescribeTopicRequest{Name: t.Topic}); err == nil {
				rt.ErrorCode = kerr.TopicAlreadyExists.Code
			}
		default:
			rep, err := cc.sess.CreateTopic(ctx, &wire.CreateTopicRequest{Name: t.Topic, Config: wire.TopicConfig{Partitions: uint32(partitions)}})
			rt.ErrorCode = codeOf(err)
			if err != nil {
				if msg := err.Error(); rt.ErrorCode != kerr.TopicAlreadyExists.Code {
					rt.ErrorMessage = &msg
				}
				if rt.ErrorCode == kerr.InvalidRequest.Code {
					rt.ErrorCode = kerr.InvalidTopicException.Code
				}
			} else {
				rt.TopicID = rep.Topic.ID
				partitions = int32(rep.Topic.Config.Partitions)
			}
		}
		rt.NumPartitions, rt.ReplicationFactor = partitions, 1
		r.Topics = append(r.Topics, rt)
	}
	return r
}

func (cc *conn) deleteTopics(ctx context.Context, m *kmsg.DeleteTopicsRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.DeleteTopicsResponse)
	names := m.TopicNames
	for _, t := range m.Topics {
		if t.Topic != nil {
			names = append(names, *t.Topic)
		}
	}
	for _, name := range names {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		_, err := cc.sess.DeleteTopic(ctx, &wire.DeleteTopicRequest{Name: name})
		rt.ErrorCode = codeOf(err)
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// deleteRecords is Ledge's purge: Kafka's DeleteRecords up to the high
// watermark (offset -1, or the high watermark itself). The partition's
// history epoch, Kafka's leader epoch, goes up, so consumers behind the
// purge are fenced and find their position moved to the new start.
// Deleting up to an offset below the high watermark is not something a
// Ledge log does (it only ever raises its start to its end, or by
// retention): OFFSET_OUT_OF_RANGE.
func (cc *conn) deleteRecords(ctx context.Context, m *kmsg.DeleteRecordsRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, t := range m.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		d, derr := cc.sess.DescribeTopic(ctx, &wire.DescribeTopicRequest{Name: t.Topic})
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case derr != nil:
				rp.ErrorCode = codeOf(derr)
			case p.Partition < 0 || int(p.Partition) >= len(d.Partitions):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p.Offset != -1 && uint64(p.Offset) != d.Partitions[p.Partition].HighWatermark:
				rp.ErrorCode = kerr.OffsetOutOfRange.Code
			default:
				rep, err := cc.sess.Purge(ctx, &wire.PurgeRequest{Topic: t.Topic, TopicID: d.Topic.ID, Partitions: []uint32{uint32(p.Partition)}})
				if err != nil {
					rp.ErrorCode = codeOf(err)
				} else if len(rep.Partitions) == 1 {
					rp.ErrorCode = codeOfStatus(rep.Partitions[0].Status)
					rp.LowWatermark = int64(rep.Partitions[0].StartOffset)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}
