package session

import (
	"errors"
	"reflect"
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
