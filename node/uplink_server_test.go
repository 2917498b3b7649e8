package node

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/node/uplink"
)

// TestNodeIDIsStable: the node id is created once and read back after a
// restart, so transactional ids survive restarts (and backups).
func TestNodeIDIsStable(t *testing.T) {
	m := ownertest.NewMeta()
	id, err := LoadOrCreateNodeID(context.Background(), m)
	if err != nil || id == "" {
		t.Fatalf("id %q: %v", id, err)
	}
	again, err := LoadOrCreateNodeID(context.Background(), m.Restart())
	if err != nil || again != id {
		t.Fatalf("after a restart: %q (%v), want %q", again, err, id)
	}
}

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
