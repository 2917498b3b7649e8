package node

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/ledgemq/ledge/sdk"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// TestSDKDescribesOnANodeOlderThanSkipped: a node older than the describe
// requests' flags refuses them as malformed (trailing bytes); the SDK asks
// again without them and reports nothing skipped.
func TestSDKDescribesOnANodeOlderThanSkipped(t *testing.T) {
	ctx := safetyContext(t)
	tn := startNode(t, nil, nil)
	ln, err := quic.Listen("127.0.0.1:0", quic.ServerTLSConfig(tn.certs.GetCertificate), quic.Config{Authenticate: tn.authenticate})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var refused, served atomic.Int32
	// old answers as a node that does not know the flags.
	old := func(s *quic.Stream) {
		for {
			req, err := s.ReadFrame()
			if err != nil {
				return
			}
			f, err := parseFrame(req.Frame)
			if err != nil {
				t.Error(err)
				return
			}
			var reply []byte
			switch f.Kind {
			case wire.KindDescribeTopic:
				var m wire.DescribeTopicRequest
				if err := wire.DecodeRequest(f, &m); err != nil || m.WithSkipped {
					refused.Add(1)
					reply = wire.AppendErrorReply(nil, f.FrameHeader, wire.StatusMalformedRequest, "describe-topic: trailing bytes")
					break
				}
				served.Add(1)
				reply, _ = wire.AppendReply(nil, f.ID, &wire.DescribeTopicReply{
					Topic:      wire.TopicInfo{Name: m.Name, Config: wire.TopicConfig{Partitions: 1}},
					Partitions: []wire.PartitionState{{HighWatermark: 1027, History: 2}},
				})
			case wire.KindDescribeGroup:
				var m wire.DescribeGroupRequest
				if err := wire.DecodeRequest(f, &m); err != nil || m.WithSkipped {
					refused.Add(1)
					reply = wire.AppendErrorReply(nil, f.FrameHeader, wire.StatusMalformedRequest, "describe-group: trailing bytes")
					break
				}
				served.Add(1)
				reply, _ = wire.AppendReply(nil, f.ID, &wire.DescribeGroupReply{
					Group: m.Group, Offsets: []wire.GroupOffset{{Topic: "t", Resolved: 3, HighWatermark: 1027}},
				})
			default:
				reply = wire.AppendErrorReply(nil, f.FrameHeader, wire.StatusUnknownKind, "not in this test")
			}
			if err := s.Reply(req, reply); err != nil {
				return
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			go func() {
				for {
					s, err := c.AcceptStream(ctx)
					if err != nil {
						return
					}
					go old(s)
				}
			}()
		}
	}()

	c, err := sdk.Dial(ctx, ln.Addr().String(), sdk.WithDataDir(tn.Paths().DataDir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.DescribeTopic(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if p := d.Partitions[0]; p.Skipped != 0 || p.Records() != 1027 {
		t.Fatalf("partition %+v: want 1027 records and none skipped from an older node", p)
	}
	g, err := c.DescribeGroup(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o := g.Offsets[0]; o.Skipped != 0 || o.Lag != 1024 {
		t.Fatalf("offset %+v: want lag 1024 and none skipped from an older node", o)
	}
	if refused.Load() != 2 || served.Load() != 2 {
		t.Fatalf("the older node refused %d and served %d describes, want 2 and 2", refused.Load(), served.Load())
	}
}
