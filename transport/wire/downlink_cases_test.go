package wire_test

import (
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
	"pgregory.net/rapid"
)

func genDownlinkInfo(t *rapid.T) wire.DownlinkInfo {
	return wire.DownlinkInfo{
		Spec: wire.DownlinkSpec{
			Topic: genName(t, "topic"), Seeds: genSlice(t, 3, "seeds", func(t *rapid.T) string { return genName(t, "seed") }),
			From: genName(t, "from"), TLS: rapid.Bool().Draw(t, "tls"),
			TLSCAFile: genText(t, "ca"), TLSCertFile: genText(t, "cert"), TLSKeyFile: genText(t, "key"),
			TLSServer: genName(t, "server"), SASLMechanism: genName(t, "mechanism"), SASLUser: genName(t, "user"),
			SASLPasswordFile: genText(t, "password file"),
		},
		State: rapid.Uint8Range(0, 4).Draw(t, "state"), Connected: rapid.Bool().Draw(t, "connected"),
		Records: rapid.Uint64().Draw(t, "records"), Failures: rapid.Uint64().Draw(t, "failures"),
		LastError: genText(t, "last error"), BackoffNanos: rapid.Uint64().Draw(t, "backoff"),
		FailingNanos: rapid.Uint64().Draw(t, "failing"),
		Partitions: genSlice(t, 3, "partitions", func(t *rapid.T) wire.DownlinkPartitionStatus {
			return wire.DownlinkPartitionStatus{
				Partition: genPartitionIndex(t), Local: genPartitionIndex(t),
				Producer: rapid.Uint64().Draw(t, "producer"), Epoch: rapid.Uint32().Draw(t, "epoch"),
				Position: rapid.Int64().Draw(t, "position"), HighWatermark: rapid.Int64().Draw(t, "hw"),
				Lag: rapid.Int64().Draw(t, "lag"), Records: rapid.Uint64().Draw(t, "records"),
				Deleted: rapid.Uint64().Draw(t, "deleted"),
			}
		}),
	}
}

// downlinkMessageCases lists every Kafka downlink message.
func downlinkMessageCases() []messageCase {
	return []messageCase{
		{"AddDownlinkRequest", custom(func(t *rapid.T) *wire.AddDownlinkRequest {
			return &wire.AddDownlinkRequest{Spec: genDownlinkInfo(t).Spec}
		}), zeroOf[wire.AddDownlinkRequest]()},
		{"AddDownlinkReply", rapid.Just[wire.Message](&wire.AddDownlinkReply{}), zeroOf[wire.AddDownlinkReply]()},
		{"ListDownlinksRequest", rapid.Just[wire.Message](&wire.ListDownlinksRequest{}), zeroOf[wire.ListDownlinksRequest]()},
		{"ListDownlinksReply", custom(func(t *rapid.T) *wire.ListDownlinksReply {
			return &wire.ListDownlinksReply{Downlinks: genSlice(t, 2, "downlinks", genDownlinkInfo)}
		}), zeroOf[wire.ListDownlinksReply]()},
		{"DownlinkStatusRequest", custom(func(t *rapid.T) *wire.DownlinkStatusRequest {
			return &wire.DownlinkStatusRequest{Topic: genName(t, "topic")}
		}), zeroOf[wire.DownlinkStatusRequest]()},
		{"DownlinkStatusReply", custom(func(t *rapid.T) *wire.DownlinkStatusReply {
			return &wire.DownlinkStatusReply{Downlink: genDownlinkInfo(t)}
		}), zeroOf[wire.DownlinkStatusReply]()},
		{"RemoveDownlinkRequest", custom(func(t *rapid.T) *wire.RemoveDownlinkRequest {
			return &wire.RemoveDownlinkRequest{Topic: genName(t, "topic")}
		}), zeroOf[wire.RemoveDownlinkRequest]()},
		{"RemoveDownlinkReply", rapid.Just[wire.Message](&wire.RemoveDownlinkReply{}), zeroOf[wire.RemoveDownlinkReply]()},
	}
}

// A downlink's status says its state, connection and per-partition lag.
func TestDownlinkStatusRoundTrip(t *testing.T) {
	in := &wire.DownlinkStatusReply{Downlink: wire.DownlinkInfo{
		Spec:  wire.DownlinkSpec{Topic: "commands", Seeds: []string{"kafka:9092"}, From: "cloud.commands"},
		State: 1, Connected: true, Records: 20000,
		Partitions: []wire.DownlinkPartitionStatus{{Partition: 3, Local: 1, Producer: 7, Epoch: 2, Position: 5000, HighWatermark: 5200, Lag: 200, Records: 5000}},
	}}
	b, err := in.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	var out wire.DownlinkStatusReply
	if err := out.Decode(b); err != nil {
		t.Fatal(err)
	}
	if p := out.Downlink.Partitions[0]; out.Downlink.Spec.From != "cloud.commands" || p.Lag != 200 || p.Position != 5000 || !out.Downlink.Connected {
		t.Fatalf("decoded %+v", out.Downlink)
	}
}
