package node

import (
	"testing"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/sdk"
	"github.com/ledgemq/ledge/transport/wire"
)

// TestDescribeLeavesOutOffsetsACrashSkipped: after a crash of a "none"
// topic resumed numbering above its reservation, the SDK's topic
// description counts the partition's records without the skipped offsets,
// and a group that committed the log's end has no lag, though the high
// watermark moved past its position. A client that does not ask for
// skipped offsets gets the replies it always did.
func TestDescribeLeavesOutOffsetsACrashSkipped(t *testing.T) {
	ctx := safetyContext(t)
	dir := t.TempDir()
	crashed := crashAboveReservation(ctx, t, engine.Options{Dir: dir, ReservedBytes: -1}, owner.GroupBookmarkKey("g"))

	tn := startNode(t, nil, func(cfg *Config) { cfg.DataDir, cfg.FS = dir, crashed })
	c, err := sdk.Dial(ctx, tn.Addr(), sdk.WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw := tn.mustDial(t, tn.admin)
	if err := raw.call(raw.main, &wire.JoinGroupRequest{Group: "g", Topics: []string{"t"}}, &wire.JoinGroupReply{}); err != nil {
		t.Fatal(err)
	}

	d, err := c.DescribeTopic(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	ps := d.Partitions[0]
	if ps.HighWatermark <= 3 {
		t.Fatalf("high watermark %d: the crash skipped nothing, the test shows nothing", ps.HighWatermark)
	}
	if ps.Skipped != ps.HighWatermark-3 || ps.Records() != 3 {
		t.Fatalf("partition %+v: %d records, want 3 and %d skipped", ps, ps.Records(), ps.HighWatermark-3)
	}
	g, err := c.DescribeGroup(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Offsets) != 1 {
		t.Fatalf("offsets %+v: want one", g.Offsets)
	}
	if o := g.Offsets[0]; o.Resume != 3 || o.Lag != 0 || o.Skipped != ps.HighWatermark-3 {
		t.Fatalf("offset %+v: want resume 3, lag 0, %d skipped", o, ps.HighWatermark-3)
	}

	// A client that does not know the field neither asks nor gets it.
	var topicReply wire.DescribeTopicReply
	if err := raw.call(raw.main, &wire.DescribeTopicRequest{Name: "t"}, &topicReply); err != nil {
		t.Fatal(err)
	}
	if s := topicReply.Partitions[0].Skipped; s != 0 {
		t.Fatalf("%d skipped offsets sent unasked", s)
	}
	var groupReply wire.DescribeGroupReply
	if err := raw.call(raw.main, &wire.DescribeGroupRequest{Group: "g"}, &groupReply); err != nil {
		t.Fatal(err)
	}
	if s := groupReply.Offsets[0].Skipped; s != 0 {
		t.Fatalf("%d skipped offsets sent unasked", s)
	}
}
