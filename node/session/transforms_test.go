package session

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node/transform"
	"github.com/ledgemq/ledge/transport/wire"
)

// A transform reads one topic and writes another: adding one needs the
// admin scope on both, listing them the admin scope.
func TestTransformRequestsNeedAdminOnBothTopics(t *testing.T) {
	n := newTestNode(t)
	ctx := t.Context()
	sensorsAdmin := n.session("sensors", wire.ScopeAdmin).Call(0)
	add := &wire.AddTransformRequest{Spec: wire.TransformSpec{Name: "copy", Plugin: "pass", From: "sensors", To: "billing"}}
	if _, err := sensorsAdmin.AddTransform(ctx, add); !errors.Is(err, ErrForbidden) {
		t.Errorf("add a transform into a topic the token does not administer: %v, want ErrForbidden", err)
	}
	reader := n.session(wire.AllTopics, wire.ScopeConsume).Call(0)
	if _, err := reader.ListTransforms(ctx, &wire.ListTransformsRequest{}); !errors.Is(err, ErrForbidden) {
		t.Errorf("list transforms without the admin scope: %v, want ErrForbidden", err)
	}
}

// A transform's internal group is the transform's alone: a client can
// neither join it (and take its partitions, or write its state) nor
// delete it (and its exactly-once record).
func TestTransformGroupsAreNotClients(t *testing.T) {
	n := newTestNode(t)
	ctx := t.Context()
	admin := n.session(wire.AllTopics, wire.ScopeAdmin|wire.ScopeConsume).Call(0)
	if _, err := admin.JoinGroup(ctx, &wire.JoinGroupRequest{Group: "__transform.copy", Topics: []string{"sensors"}}); err == nil ||
		!strings.Contains(err.Error(), "transform") {
		t.Errorf("joining a transform's group: %v, want a refusal", err)
	}
	if _, err := admin.DeleteGroup(ctx, &wire.DeleteGroupRequest{Group: "__transform.copy"}); err == nil ||
		!strings.Contains(err.Error(), "transform") {
		t.Errorf("deleting a transform's group: %v, want a refusal", err)
	}
}

// What the node reports of a transform carries its spec, its parameters
// in key order, and each partition's progress.
func TestTransformInfoToWire(t *testing.T) {
	at := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	got := transformInfoToWire(transform.Info{
		Spec: transform.Spec{Name: "m", Plugin: "perminute", From: "raw", To: "agg", Paused: true,
			Params: map[string]string{"window": "60s", "key": "site"}},
		Partitions: []transform.PartitionStatus{{Partition: 1, Running: true, Committed: 7, HighWatermark: 9, Lag: 2,
			RecordsIn: 7, RecordsOut: 1, PluginFailures: 1, Errors: 1, LastError: "trap", LastErrorAt: at}},
	})
	want := wire.TransformInfo{
		Spec: wire.TransformSpec{Name: "m", Plugin: "perminute", From: "raw", To: "agg", Paused: true,
			Params: []wire.FilterParam{{Key: "key", Value: "site"}, {Key: "window", Value: "60s"}}},
		Partitions: []wire.TransformPartitionStatus{{Partition: 1, Running: true, Committed: 7, HighWatermark: 9, Lag: 2,
			RecordsIn: 7, RecordsOut: 1, PluginFailures: 1, Errors: 1, LastError: "trap", LastErrorAt: at.UnixNano()}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}
