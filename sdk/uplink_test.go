package sdk

import (
	"reflect"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

// TestUplinkConfigWireRoundTrip: what AddUplink sends is what the status
// reports back, and unknown policies are refused before anything is sent.
func TestUplinkConfigWireRoundTrip(t *testing.T) {
	cfg := UplinkConfig{Seeds: []string{"k:9092"}, To: "central", Partitioning: "key", Overflow: "drop-oldest",
		TLS: &UplinkTLS{CAFile: "/ca.pem"}, SASL: &UplinkSASL{Mechanism: "PLAIN", User: "u", PasswordFile: "/pw"}}
	spec, err := uplinkSpecToWire("events", cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := uplinkFromWire(wire.UplinkInfo{Spec: spec, Partitions: []wire.UplinkPartitionStatus{{State: 3}}})
	if got.Topic != "events" || !reflect.DeepEqual(got.Config, cfg) || got.Partitions[0].State != "fenced" {
		t.Fatalf("got %+v, want %+v", got, cfg)
	}
	if _, err := uplinkSpecToWire("events", UplinkConfig{Overflow: "never"}); err == nil {
		t.Fatal("unknown overflow accepted")
	}
	if _, err := uplinkSpecToWire("events", UplinkConfig{Partitioning: "hash"}); err == nil {
		t.Fatal("unknown partitioning accepted")
	}
}
