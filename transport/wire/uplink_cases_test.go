package wire_test

import (
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
	"pgregory.net/rapid"
)

func genUplinkSpec(t *rapid.T) wire.UplinkSpec {
	return wire.UplinkSpec{
		Topic: genName(t, "topic"), Seeds: genSlice(t, 3, "seeds", func(t *rapid.T) string { return genName(t, "seed") }),
		To: genName(t, "to"), Partitioning: rapid.Uint8Range(0, 1).Draw(t, "partitioning"),
		Overflow: rapid.Uint8Range(0, 1).Draw(t, "overflow"), TLS: rapid.Bool().Draw(t, "tls"),
		TLSCAFile: genText(t, "ca"), TLSCertFile: genText(t, "cert"), TLSKeyFile: genText(t, "key"),
		TLSServer: genName(t, "server"), SASLMechanism: genName(t, "mechanism"), SASLUser: genName(t, "user"),
		SASLPasswordFile: genText(t, "password file"),
	}
}

func genUplinkInfo(t *rapid.T) wire.UplinkInfo {
	return wire.UplinkInfo{
		Spec: genUplinkSpec(t),
		Partitions: genSlice(t, 3, "partitions", func(t *rapid.T) wire.UplinkPartitionStatus {
			return wire.UplinkPartitionStatus{
				Partition: genPartitionIndex(t), State: rapid.Uint8Range(0, 4).Draw(t, "state"),
				Position: rapid.Uint64().Draw(t, "position"), HighWatermark: rapid.Uint64().Draw(t, "hw"),
				LagRecords: rapid.Uint64().Draw(t, "lag"), LagAgeNanos: rapid.Uint64().Draw(t, "age"),
				Forwarded: rapid.Uint64().Draw(t, "forwarded"), Dropped: rapid.Uint64().Draw(t, "dropped"),
				Failures: rapid.Uint64().Draw(t, "failures"), TransactionalID: genName(t, "txn id"),
				LastError: genText(t, "last error"), Transactions: rapid.Uint64().Draw(t, "transactions"),
				BackoffNanos: rapid.Uint64().Draw(t, "backoff"), FailingNanos: rapid.Uint64().Draw(t, "failing"),
				HeldBack: rapid.Uint64().Draw(t, "held back"),
			}
		}),
	}
}

// uplinkMessageCases lists every Kafka uplink message.
func uplinkMessageCases() []messageCase {
	return []messageCase{
		{"AddUplinkRequest", custom(func(t *rapid.T) *wire.AddUplinkRequest {
			return &wire.AddUplinkRequest{Spec: genUplinkSpec(t)}
		}), zeroOf[wire.AddUplinkRequest]()},
		{"AddUplinkReply", rapid.Just[wire.Message](&wire.AddUplinkReply{}), zeroOf[wire.AddUplinkReply]()},
		{"ListUplinksRequest", rapid.Just[wire.Message](&wire.ListUplinksRequest{}), zeroOf[wire.ListUplinksRequest]()},
		{"ListUplinksReply", custom(func(t *rapid.T) *wire.ListUplinksReply {
			return &wire.ListUplinksReply{Uplinks: genSlice(t, 2, "uplinks", genUplinkInfo)}
		}), zeroOf[wire.ListUplinksReply]()},
		{"UplinkStatusRequest", custom(func(t *rapid.T) *wire.UplinkStatusRequest {
			return &wire.UplinkStatusRequest{Topic: genName(t, "topic")}
		}), zeroOf[wire.UplinkStatusRequest]()},
		{"UplinkStatusReply", custom(func(t *rapid.T) *wire.UplinkStatusReply {
			return &wire.UplinkStatusReply{Uplink: genUplinkInfo(t)}
		}), zeroOf[wire.UplinkStatusReply]()},
		{"RemoveUplinkRequest", custom(func(t *rapid.T) *wire.RemoveUplinkRequest {
			return &wire.RemoveUplinkRequest{Topic: genName(t, "topic")}
		}), zeroOf[wire.RemoveUplinkRequest]()},
		{"RemoveUplinkReply", rapid.Just[wire.Message](&wire.RemoveUplinkReply{}), zeroOf[wire.RemoveUplinkReply]()},
	}
}

func FuzzDecodeAddUplinkRequest(f *testing.F)    { fuzzDecoder(f, "AddUplinkRequest") }
func FuzzDecodeListUplinksReply(f *testing.F)    { fuzzDecoder(f, "ListUplinksReply") }
func FuzzDecodeUplinkStatusRequest(f *testing.F) { fuzzDecoder(f, "UplinkStatusRequest") }
func FuzzDecodeUplinkStatusReply(f *testing.F)   { fuzzDecoder(f, "UplinkStatusReply") }
func FuzzDecodeRemoveUplinkRequest(f *testing.F) { fuzzDecoder(f, "RemoveUplinkRequest") }
