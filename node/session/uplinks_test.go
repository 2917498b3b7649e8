package session

import (
	"reflect"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node/uplink"
)

// TestUplinkSpecWireRoundTrip: the admin requests carry every field of a
// spec.
func TestUplinkSpecWireRoundTrip(t *testing.T) {
	spec := uplink.Spec{Topic: "events", Seeds: []string{"k:9092"}, To: "central", Partitioning: uplink.ByKey,
		Overflow: uplink.DropOldest, TLS: &uplink.TLS{CAFile: "/ca"}, SASL: &uplink.SASL{Mechanism: "PLAIN", User: "u", PasswordFile: "/pw"}}
	got := uplinkSpecFromWire(uplinkInfoToWire(uplink.Info{Spec: spec}, time.Now()).Spec)
	if !reflect.DeepEqual(got, spec) {
		t.Fatalf("got %+v, want %+v", got, spec)
	}
}
