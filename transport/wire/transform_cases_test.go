package wire_test

import (
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
	"pgregory.net/rapid"
)

func genTransformInfo(t *rapid.T) wire.TransformInfo {
	return wire.TransformInfo{
		Spec: wire.TransformSpec{
			Name: genName(t, "name"), Plugin: genName(t, "plugin"), From: genName(t, "from"), To: genName(t, "to"),
			Params: genSlice(t, 3, "params", func(t *rapid.T) wire.FilterParam {
				return wire.FilterParam{Key: genName(t, "key"), Value: genText(t, "value")}
			}),
			Paused: rapid.Bool().Draw(t, "paused"),
		},
		Error: genText(t, "error"),
		Partitions: genSlice(t, 3, "partitions", func(t *rapid.T) wire.TransformPartitionStatus {
			return wire.TransformPartitionStatus{
				Partition: genPartitionIndex(t), Running: rapid.Bool().Draw(t, "running"),
				Committed: rapid.Uint64().Draw(t, "committed"), HighWatermark: rapid.Uint64().Draw(t, "hw"),
				Lag: rapid.Uint64().Draw(t, "lag"), RecordsIn: rapid.Uint64().Draw(t, "in"),
				RecordsOut: rapid.Uint64().Draw(t, "out"), PluginFailures: rapid.Uint64().Draw(t, "plugin failures"),
				Errors: rapid.Uint64().Draw(t, "errors"), LastError: genText(t, "last error"),
				LastErrorAt: rapid.Int64().Draw(t, "last error at"),
			}
		}),
	}
}

func genTransformName(t *rapid.T) string { return genName(t, "transform") }

// transformMessageCases lists every transform message.
func transformMessageCases() []messageCase {
	return []messageCase{
		{"AddTransformRequest", custom(func(t *rapid.T) *wire.AddTransformRequest {
			return &wire.AddTransformRequest{Spec: genTransformInfo(t).Spec}
		}), zeroOf[wire.AddTransformRequest]()},
		{"AddTransformReply", rapid.Just[wire.Message](&wire.AddTransformReply{}), zeroOf[wire.AddTransformReply]()},
		{"ListTransformsRequest", rapid.Just[wire.Message](&wire.ListTransformsRequest{}), zeroOf[wire.ListTransformsRequest]()},
		{"ListTransformsReply", custom(func(t *rapid.T) *wire.ListTransformsReply {
			return &wire.ListTransformsReply{Transforms: genSlice(t, 2, "transforms", genTransformInfo)}
		}), zeroOf[wire.ListTransformsReply]()},
		{"TransformStatusRequest", custom(func(t *rapid.T) *wire.TransformStatusRequest {
			return &wire.TransformStatusRequest{Name: genTransformName(t)}
		}), zeroOf[wire.TransformStatusRequest]()},
		{"TransformStatusReply", custom(func(t *rapid.T) *wire.TransformStatusReply {
			return &wire.TransformStatusReply{Transform: genTransformInfo(t)}
		}), zeroOf[wire.TransformStatusReply]()},
		{"PauseTransformRequest", custom(func(t *rapid.T) *wire.PauseTransformRequest {
			return &wire.PauseTransformRequest{Name: genTransformName(t)}
		}), zeroOf[wire.PauseTransformRequest]()},
		{"PauseTransformReply", rapid.Just[wire.Message](&wire.PauseTransformReply{}), zeroOf[wire.PauseTransformReply]()},
		{"ResumeTransformRequest", custom(func(t *rapid.T) *wire.ResumeTransformRequest {
			return &wire.ResumeTransformRequest{Name: genTransformName(t)}
		}), zeroOf[wire.ResumeTransformRequest]()},
		{"ResumeTransformReply", rapid.Just[wire.Message](&wire.ResumeTransformReply{}), zeroOf[wire.ResumeTransformReply]()},
		{"RemoveTransformRequest", custom(func(t *rapid.T) *wire.RemoveTransformRequest {
			return &wire.RemoveTransformRequest{Name: genTransformName(t)}
		}), zeroOf[wire.RemoveTransformRequest]()},
		{"RemoveTransformReply", rapid.Just[wire.Message](&wire.RemoveTransformReply{}), zeroOf[wire.RemoveTransformReply]()},
	}
}

func FuzzDecodeAddTransformRequest(f *testing.F)    { fuzzDecoder(f, "AddTransformRequest") }
func FuzzDecodeListTransformsReply(f *testing.F)    { fuzzDecoder(f, "ListTransformsReply") }
func FuzzDecodeTransformStatusRequest(f *testing.F) { fuzzDecoder(f, "TransformStatusRequest") }
func FuzzDecodeTransformStatusReply(f *testing.F)   { fuzzDecoder(f, "TransformStatusReply") }
func FuzzDecodeRemoveTransformRequest(f *testing.F) { fuzzDecoder(f, "RemoveTransformRequest") }
