package sdk

import (
	"reflect"
	"testing"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// What the node reports of a transform reads back as the configuration
// it was added with, and its error time as a time.
func TestTransformFromWire(t *testing.T) {
	at := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	got := transformFromWire(wire.TransformInfo{
		Spec: wire.TransformSpec{Name: "minutes", Plugin: "perminute", From: "raw", To: "agg", Paused: true,
			Params: []wire.FilterParam{{Key: "field", Value: "site"}}},
		Partitions: []wire.TransformPartitionStatus{
			{Partition: 1, Committed: 5, HighWatermark: 9, Lag: 4, PluginFailures: 2, Errors: 2, LastError: "trap", LastErrorAt: at.UnixNano()},
			{Partition: 2},
		},
	})
	want := Transform{Name: "minutes", Paused: true,
		Config: TransformConfig{Plugin: "perminute", From: "raw", To: "agg", Params: map[string]string{"field": "site"}},
		Partitions: []TransformPartition{
			{Partition: 1, Committed: 5, HighWatermark: 9, Lag: 4, PluginFailures: 2, Errors: 2, LastError: "trap", LastErrorAt: time.Unix(0, at.UnixNano())},
			{Partition: 2},
		}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}
