package sdk

import (
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

// TestDownlinkFromWire: the status a node reports reads back as the
// configuration added, its state by name, and each Kafka partition's
// position, lag and counters; an unknown state reads "unknown".
func TestDownlinkFromWire(t *testing.T) {
	got := downlinkFromWire(wire.DownlinkInfo{
		Spec: wire.DownlinkSpec{Topic: "commands", Seeds: []string{"k:9092"}, From: "cloud.commands",
			TLS: true, TLSCAFile: "/ca.pem", SASLMechanism: "PLAIN", SASLUser: "u", SASLPasswordFile: "/pw"},
		State: 3, Connected: true, Records: 9, Failures: 2, LastError: "fenced",
		Partitions: []wire.DownlinkPartitionStatus{{Partition: 2, Local: 0, Producer: 5, Epoch: 1, Position: -1, HighWatermark: 40, Lag: 40, Deleted: 3}},
	})
	p := got.Partitions[0]
	if got.Topic != "commands" || got.Config.From != "cloud.commands" || got.Config.TLS.CAFile != "/ca.pem" ||
		got.Config.SASL.User != "u" || got.State != "fenced" || !got.Connected || got.Records != 9 ||
		p.Partition != 2 || p.Position != -1 || p.Lag != 40 || p.Deleted != 3 || p.Producer != 5 {
		t.Fatalf("got %+v", got)
	}
	if s := downlinkFromWire(wire.DownlinkInfo{State: 9}).State; s != "unknown" {
		t.Fatalf("state 9 reads %q", s)
	}
}
