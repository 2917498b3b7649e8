package kafka

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/ledgemq/ledge/record"

	"github.com/ledgemq/ledge/transport/wire"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetch reads every partition of the request in one poll of the node, by
// offset, as an anonymous reader: a Kafka fetch names no group. The poll
// long-polls through the owners (parked polls) for up to MaxWaitMillis
// when MinBytes asks for records and none are there.
func (cc *conn) fetch(ctx context.Context, m *kmsg.FetchRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.FetchResponse)
	poll := &wire.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerAnonymous}}
	if m.MinBytes > 0 && m.MaxWaitMillis > 0 {
		poll.MaxWait = time.Duration(m.MaxWaitMillis) * time.Millisecond
	}
	if m.MaxBytes > 0 {
		poll.MaxBytes = uint32(m.MaxBytes)
	}
	// slot says where a polled partition is in the request (t, p) and in
	// the response (rt, rp).
	type slot struct{ t, p, rt, rp int }
	n := 0
	for i := range m.Topics {
		n += len(m.Topics[i].Partitions)
	}
	// A fetch is answered for at most MaxRequestElements partitions (less
	// its topics), each costing the node about 1.4 KB to answer. The
	// others are left out of the response, as a broker leaves out of an
	// incremental fetch's response the partitions it has nothing for:
	// the client fetches them again (franz-go rotates where its requests
	// begin), and they cost no more than their decoding.
	answer := min(n, max(cc.s.cfg.MaxRequestElements-len(m.Topics), 1))
	type tp struct {
		t string
		p int32
	}
	var seen map[tp]struct{}
	if n > 1 {
		seen = make(map[tp]struct{}, answer)
	}
	where := make([]slot, 0, answer)
	poll.Partitions = make([]wire.PollPartition, 0, answer)
	r.Topics = make([]kmsg.FetchResponseTopic, 0, len(m.Topics))
	answered, left := 0, 0
	for i := range m.Topics {
		t := &m.Topics[i]
		var rt *kmsg.FetchResponseTopic
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if answered == answer {
				left++
				continue
			}
			// A partition named twice is answered once.
			if seen != nil {
				k := tp{t.Topic, p.Partition}
				if _, dup := seen[k]; dup {
					continue
				}
				seen[k] = struct{}{}
			}
			if rt == nil {
				r.Topics = append(r.Topics, kmsg.NewFetchResponseTopic())
				rt = &r.Topics[len(r.Topics)-1]
				rt.Topic = t.Topic
				rt.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, min(len(t.Partitions), answer-answered))
			}
			answered++
			rt.Partitions = append(rt.Partitions, kmsg.NewFetchResponseTopicPartition())
			rp := &rt.Partitions[len(rt.Partitions)-1]
			rp.Partition = p.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rp.RecordBatches = []byte{} // not null: librdkafka refuses a null record set
			if p.Partition < 0 || p.FetchOffset < 0 {
				rp.ErrorCode = kerr.OffsetOutOfRange.Code
				if p.Partition < 0 {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
				continue
			}
			pp := wire.PollPartition{
				Topic: t.Topic, Partition: uint32(p.Partition),
				Position: wire.Position{Mode: wire.PositionOffset, Offset: uint64(p.FetchOffset)},
			}
			if p.PartitionMaxBytes > 0 {
				pp.MaxBytes = uint32(p.PartitionMaxBytes)
			}
			poll.Partitions = append(poll.Partitions, pp)
			where = append(where, slot{i, j, len(r.Topics) - 1, len(rt.Partitions) - 1})
		}
	}
	if left > 0 {
		cc.refusedOnce("fetch", n, answer)
	}
	if len(poll.Partitions) == 0 {
		return r
	}
	rep, release, err := cc.sess.Poll(ctx, poll)
	if err != nil {
		code := codeOf(err)
		for _, w := range where {
			r.Topics[w.rt].Partitions[w.rp].ErrorCode = code
		}
		return r
	}
	defer release()
	for k, w := range where {
		req := &m.Topics[w.t].Partitions[w.p]
		rp := &r.Topics[w.rt].Partitions[w.rp]
		pr := &rep.Partitions[k]
		switch pr.Status {
		case wire.StatusUnknownTopic, wire.StatusUnknownPartition, wire.StatusForbidden, wire.StatusTopicRecreated:
			rp.ErrorCode = codeOfStatus(pr.Status)
			continue
		}
		rp.HighWatermark, rp.LastStableOffset = int64(pr.HighWatermark), int64(pr.HighWatermark)
		rp.LogStartOffset = int64(pr.StartOffset)
		// A reader from an older history (before a purge or a lossy
		// recovery) is fenced: it refreshes its metadata and validates
		// its position with OffsetForLeaderEpoch (KIP-320).
		if code := leaderEpochCode(req.CurrentLeaderEpoch, pr.History); code != 0 {
			rp.ErrorCode = code
			continue
		}
		if pr.Status != wire.StatusOK {
			rp.ErrorCode = codeOfStatus(pr.Status)
			continue
		}
		epoch := leaderEpoch(pr.History)
		for _, part := range pr.BatchParts {
			rp.RecordBatches = appendKafkaBatches(rp.RecordBatches, part, epoch)
		}
		rp.RecordBatches = appendKafkaBatches(rp.RecordBatches, pr.Batches, epoch)
	}
	return r
}

// appendKafkaBatches appends the Ledge batches of b, back to back, as
// uncompressed Kafka v2 batches stamped with the leader epoch.
func appendKafkaBatches(dst, b []byte, epoch int32) []byte {
	var it record.RecordIterator
	var body []byte
	for len(b) >= record.BatchHeaderSize {
		h, err := record.ParseBatchHeader(b)
		if err != nil || int(h.Length) > len(b) {
			return dst
		}
		one := b[:h.Length]
		b = b[h.Length:]
		if err := it.Reset(one, record.BatchMaxSize); err != nil {
			return dst
		}
		start := len(dst)
		attrs := int16(0)
		if h.AppendTime() {
			attrs |= kafkaAppendTime
		}
		pid, pepoch := int64(-1), int16(-1)
		if h.ProducerID != 0 {
			pid, pepoch = int64(h.ProducerID), int16(h.ProducerEpoch)
		}
		dst = kbin.AppendInt64(dst, int64(h.BaseOffset))
		dst = kbin.AppendInt32(dst, 0) // length, below
		dst = kbin.AppendInt32(dst, epoch)
		dst = kbin.AppendInt8(dst, 2)
		dst = kbin.AppendInt32(dst, 0) // crc, below
		dst = kbin.AppendInt16(dst, attrs)
		dst = kbin.AppendInt32(dst, int32(h.LastOffsetDelta))
		dst = kbin.AppendInt64(dst, h.BaseTimestamp)
		dst = kbin.AppendInt64(dst, h.MaxTimestamp)
		dst = kbin.AppendInt64(dst, pid)
		dst = kbin.AppendInt16(dst, pepoch)
		dst = kbin.AppendInt32(dst, h.BaseSequence)
		dst = kbin.AppendInt32(dst, int32(h.RecordCount))
		for {
			rec, ok := it.Next()
			if !ok {
				break
			}
			body = body[:0]
			body = append(body, 0) // record attributes
			body = kbin.AppendVarlong(body, rec.Timestamp-h.BaseTimestamp)
			body = kbin.AppendVarint(body, int32(rec.Offset-h.BaseOffset))
			body = kbin.AppendVarintBytes(body, rec.Key)
			body = kbin.AppendVarintBytes(body, rec.Value)
			body = kbin.AppendVarint(body, int32(len(rec.Headers)))
			for _, hd := range rec.Headers {
				body = kbin.AppendVarintString(body, hd.Key)
				body = kbin.AppendVarintBytes(body, hd.Value)
			}
			dst = kbin.AppendVarint(dst, int32(len(body)))
			dst = append(dst, body...)
		}
		if it.Err() != nil {
			return dst[:start]
		}
		binary.BigEndian.PutUint32(dst[start+8:], uint32(len(dst)-start-12))
		binary.BigEndian.PutUint32(dst[start+17:], crc32.Checksum(dst[start+21:], castagnoli))
	}
	return dst
}

// listOffsets answers the earliest (-2) and latest (-1) offsets, and the
// first offset at or after a timestamp, with the partition's history
// epoch as the leader epoch.
func (cc *conn) listOffsets(ctx context.Context, m *kmsg.ListOffsetsRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range m.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		d, derr := cc.sess.DescribeTopic(ctx, &wire.DescribeTopicRequest{Name: t.Topic})
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.Offset, rp.Timestamp = p.Partition, -1, -1
			switch {
			case derr != nil:
				rp.ErrorCode = codeOf(derr)
			case p.Partition < 0 || int(p.Partition) >= len(d.Partitions):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				st := d.Partitions[p.Partition]
				rp.LeaderEpoch = leaderEpoch(st.History)
				if code := leaderEpochCode(p.CurrentLeaderEpoch, st.History); code != 0 {
					rp.ErrorCode = code
					break
				}
				switch p.Timestamp {
				case -2: // earliest
					rp.Offset = int64(st.StartOffset)
				case -1, -3: // latest; max timestamp answered as latest
					rp.Offset = int64(st.HighWatermark)
				default:
					off, err := cc.sess.OffsetForTime(ctx, t.Topic, uint32(p.Partition), p.Timestamp)
					if err != nil {
						rp.ErrorCode = codeOf(err)
						break
					}
					rp.Offset, rp.Timestamp = int64(off), p.Timestamp
				}
				if st.Status != wire.StatusOK {
					rp.ErrorCode = codeOfStatus(st.Status)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// offsetForLeaderEpoch answers where a history epoch ended (KIP-320): the
// high watermark for the current one, the first offset of the next one
// for an earlier one (its lineage says where each began). A client whose
// position lies beyond the answer lost records and resets; otherwise it
// goes on from its position (after a purge, that is below the new start,
// and its fetch says OFFSET_OUT_OF_RANGE).
func (cc *conn) offsetForLeaderEpoch(ctx context.Context, m *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, t := range m.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		d, derr := cc.sess.DescribeTopic(ctx, &wire.DescribeTopicRequest{Name: t.Topic})
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.EndOffset = p.Partition, -1, -1
			switch {
			case derr != nil:
				rp.ErrorCode = codeOf(derr)
			case p.Partition < 0 || int(p.Partition) >= len(d.Partitions):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				st := d.Partitions[p.Partition]
				if code := leaderEpochCode(p.CurrentLeaderEpoch, st.History); code != 0 {
					rp.ErrorCode = code
					break
				}
				rp.LeaderEpoch, rp.EndOffset = leaderEpoch(st.History), int64(st.HighWatermark)
				if p.LeaderEpoch >= 0 && uint64(p.LeaderEpoch) < st.History {
					lineage, err := cc.sess.Lineage(ctx, t.Topic, uint32(p.Partition))
					if err != nil {
						rp.ErrorCode = codeOf(err)
						break
					}
					for _, tr := range lineage {
						if uint64(tr.Epoch) > uint64(p.LeaderEpoch) {
							rp.LeaderEpoch, rp.EndOffset = p.LeaderEpoch, int64(tr.Start)
							break
						}
					}
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}
