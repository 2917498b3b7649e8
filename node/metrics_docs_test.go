package node

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/downlink"
	kafkalistener "github.com/ledgemq/ledge/node/kafka"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/node/transform"
	"github.com/ledgemq/ledge/node/uplink"
	"github.com/ledgemq/ledge/node/uplink/uplinktest"
	"github.com/ledgemq/ledge/transport/wire"
)

// TestOperationsDocListsEveryMetric checks docs/OPERATIONS.md names every
// ledge_* metric the node exports, and no metric it does not.
func TestOperationsDocListsEveryMetric(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "OPERATIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)

	ops := newOpsServer(t, ops.HTTPConfig{})
	m := ops.Metrics()
	tn := startNode(t, nil, func(cfg *Config) { instrument(cfg, m) })
	ops.Attach(tn.Node)
	ops.AttachPlugins(fakePlugins{})
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{})
	// An uplink, for the ledge_uplink_* metrics.
	kafka := uplinktest.NewKafka(t, 1)
	if err := tn.Node.uplinks.Add(context.Background(), uplink.Spec{Topic: "t", Seeds: kafka.ListenAddrs(), To: uplinktest.Topic}); err != nil {
		t.Fatal(err)
	}
	// A downlink from another cluster, for the ledge_downlink_* metrics.
	cloud := uplinktest.NewKafka(t, 1)
	if err := tn.Node.downlinks.Add(context.Background(), downlink.Spec{Topic: "t", Seeds: cloud.ListenAddrs(), From: uplinktest.Topic}); err != nil {
		t.Fatal(err)
	}
	for info, _ := tn.Node.downlinks.Status("t"); info.Status.State != downlink.Running; info, _ = tn.Node.downlinks.Status("t") {
		time.Sleep(time.Millisecond)
	}
	// A paused transform, for the ledge_transform_* metrics.
	c.createTopic("t2", wire.TopicConfig{})
	c.mustCall(&wire.AddPluginRequest{Name: "pass", PluginKind: wire.PluginTransform,
		Module: buildPluginWasm(t, "../plugins/testdata/maptransform")}, &wire.AddPluginReply{})
	if err := tn.Node.transforms.Add(context.Background(), transform.Spec{Name: "copy", Plugin: "pass", From: "t", To: "t2", Paused: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.produce(c.main, "t", 0, batch(t, 0, 0, 0, "a")); err != nil {
		t.Fatal(err)
	}
	var att wire.AttachConsumerReply
	c.mustCall(&wire.AttachConsumerRequest{Name: "c"}, &att)
	got := c.pollOne(c.main, named("c", att.Session), "t", wire.Position{Mode: wire.PositionFirst}, 0)
	var commit wire.CommitReply
	c.mustCall(&wire.CommitRequest{Consumer: named("c", att.Session), Offsets: []wire.CommitOffset{{Topic: "t", Offset: got.Next, Token: got.Token}}}, &commit)
	// The request path's metrics appear once observed.
	m.RequestDone(wire.KindProduce, wire.StatusOK, time.Millisecond)
	m.FenceRejected(wire.KindCommit, fence.CodeStaleHistory)
	m.Shed("delay")
	failing := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileSync {
			return os.ErrClosed
		}
		return nil
	}))
	seg, err := m.WrapFS(failing, slog.New(slog.DiscardHandler)).Create("00000000.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	_ = seg.Sync() // a failed segment fsync, observed
	km, err := kafkalistener.RegisterMetrics(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	km.RequestDone(0, 1, time.Millisecond) // a Produce answered OFFSET_OUT_OF_RANGE
	km.ConnectionRefused("conn_limit")
	km.ConnectionClosed("idle")

	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var exported []string
	for _, f := range fams {
		if name := f.GetName(); strings.HasPrefix(name, "ledge_") {
			exported = append(exported, name)
			if !strings.Contains(doc, "`"+name+"`") {
				t.Errorf("docs/OPERATIONS.md does not list %s (%s)", name, f.GetHelp())
			}
		}
	}
	for _, name := range regexp.MustCompile("`(ledge_[a-z_]+)`").FindAllStringSubmatch(doc, -1) {
		if !slices.Contains(exported, name[1]) {
			t.Errorf("docs/OPERATIONS.md lists %s, which the node does not export", name[1])
		}
	}
}
