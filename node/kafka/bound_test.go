package kafka

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestHonestRequestsPassTheWalk: Produce and Fetch requests as franz-go
// writes them, at every version the listener speaks, many partitions
// and records included, are within their budget.
func TestHonestRequestsPassTheWalk(t *testing.T) {
	batch := sealBatch(kmsg.RecordBatch{Magic: 2, NumRecords: 1, ProducerID: -1, Records: kafkaRecords([]kmsg.Record{{Value: bytes.Repeat([]byte("v"), 1000)}})})
	produce := kmsg.NewPtrProduceRequest()
	fetch := kmsg.NewPtrFetchRequest()
	for i := range 20 {
		pt := kmsg.ProduceRequestTopic{Topic: "orders"}
		ft := kmsg.FetchRequestTopic{Topic: "orders"}
		for p := range 100 {
			pt.Partitions = append(pt.Partitions, kmsg.ProduceRequestTopicPartition{Partition: int32(p), Records: batch})
			ft.Partitions = append(ft.Partitions, kmsg.FetchRequestTopicPartition{Partition: int32(p), FetchOffset: int64(i)})
		}
		produce.Topics = append(produce.Topics, pt)
		fetch.Topics = append(fetch.Topics, ft)
	}
	fetch.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "gone", Partitions: []int32{1, 2}}}
	rack := "r1"
	fetch.Rack = rack
	for _, req := range []kmsg.Request{produce, fetch} {
		lo, hi, _ := supported(req.Key())
		for v := lo; v <= hi; v++ {
			req.SetVersion(v)
			body := req.AppendTo(nil)
			if err := checkClaims(req.Key(), v, req.IsFlexible(), body, len(body)); err != nil {
				t.Errorf("%s v%d of %d bytes: %v", kmsg.NameForKey(req.Key()), v, len(body), err)
			}
			if err := req.ReadFrom(body); err != nil {
				t.Fatalf("%s v%d does not decode: %v", kmsg.NameForKey(req.Key()), v, err)
			}
		}
	}
}

// TestClaimsBeyondTheBytesRefused: a Produce of 1 MiB claiming as many
// topics as its bytes allow kmsg (one per two bytes, each a 144-byte
// struct decoded and answered), and one claiming more tagged fields than
// fit, are refused before decoding, allocating a fraction of their size.
func TestClaimsBeyondTheBytesRefused(t *testing.T) {
	const n = 1 << 20
	topics := kbin.AppendInt16(nil, -1) // no transactional id
	topics = kbin.AppendInt16(topics, -1)
	topics = kbin.AppendInt32(topics, 1000)
	topics = kbin.AppendArrayLen(topics, n/2)
	topics = append(topics, make([]byte, n-len(topics))...)

	tags := kbin.AppendCompactNullableString(nil, nil)
	tags = kbin.AppendInt16(tags, -1)
	tags = kbin.AppendInt32(tags, 1000)
	tags = kbin.AppendCompactArrayLen(tags, 0)
	tags = kbin.AppendUvarint(tags, n/3)
	for len(tags) < n-3 {
		tags = kbin.AppendUvarint(tags, uint32(len(tags)))
		tags = kbin.AppendUvarint(tags, 0)
	}
	for name, c := range map[string]struct {
		version int16
		flex    bool
		body    []byte
	}{"topics": {7, false, topics}, "tags": {9, true, tags}} {
		var err error
		grown := allocatedBy(func() { err = checkClaims(kmsg.Produce.Int16(), c.version, c.flex, c.body, len(c.body)) })
		if err == nil {
			t.Errorf("%s: a Produce claiming more than its %d bytes carry passed", name, len(c.body))
		}
		if grown > 1<<10 {
			t.Errorf("%s: the walk allocated %d bytes", name, grown)
		}
	}
}
