package wire_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
	"pgregory.net/rapid"
)

// The plugin messages (kinds 0x0060–0x0064) get the same round-trip,
// truncation, framing and fuzz coverage as the other messages.

func genPluginInfo(t *rapid.T) wire.PluginInfo {
	var digest [32]byte
	copy(digest[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "digest"))
	var added time.Time
	if ms := rapid.Int64Range(-1<<40, 1<<42).Draw(t, "added"); ms != 0 {
		added = time.UnixMilli(ms).UTC()
	}
	return wire.PluginInfo{
		Name: genName(t, "name"), Kind: wire.PluginKind(rapid.IntRange(1, 2).Draw(t, "kind")),
		Digest: digest, Size: rapid.Uint32().Draw(t, "size"), Added: added,
		Calls: rapid.Uint64().Draw(t, "calls"), Failures: rapid.Uint64().Draw(t, "failures"),
		RecordsIn: rapid.Uint64().Draw(t, "in"), RecordsOut: rapid.Uint64().Draw(t, "out"),
		CallTime: genDuration(t, "call time"), Timeouts: rapid.Uint64().Draw(t, "timeouts"),
		Traps: rapid.Uint64().Draw(t, "traps"), InvalidAnswers: rapid.Uint64().Draw(t, "invalid"),
		MemoryPages: rapid.Uint64().Draw(t, "pages"), Quarantined: rapid.Bool().Draw(t, "quarantined"),
		State: wire.PluginState(rapid.IntRange(0, 3).Draw(t, "state")), Reason: genName(t, "reason"),
	}
}

func genPolicy(t *rapid.T) wire.Filter {
	return wire.Filter{Name: genName(t, "policy"), Params: genSlice(t, 3, "params", func(t *rapid.T) wire.FilterParam {
		return wire.FilterParam{Key: genName(t, "key"), Value: genName(t, "value")}
	})}
}

func pluginMessageCases() []messageCase {
	return []messageCase{
		{"AddPluginRequest", custom(func(t *rapid.T) *wire.AddPluginRequest {
			return &wire.AddPluginRequest{
				Name: genName(t, "name"), PluginKind: wire.PluginKind(rapid.IntRange(1, 2).Draw(t, "kind")),
				Module: genBytes(t, 200, "module"),
			}
		}), zeroOf[wire.AddPluginRequest]()},
		{"AddPluginReply", custom(func(t *rapid.T) *wire.AddPluginReply {
			return &wire.AddPluginReply{Plugin: genPluginInfo(t)}
		}), zeroOf[wire.AddPluginReply]()},
		{"ListPluginsRequest", rapid.Just[wire.Message](&wire.ListPluginsRequest{}), zeroOf[wire.ListPluginsRequest]()},
		{"ListPluginsReply", custom(func(t *rapid.T) *wire.ListPluginsReply {
			return &wire.ListPluginsReply{Plugins: genSlice(t, 3, "plugins", genPluginInfo)}
		}), zeroOf[wire.ListPluginsReply]()},
		{"RemovePluginRequest", custom(func(t *rapid.T) *wire.RemovePluginRequest {
			return &wire.RemovePluginRequest{Name: genName(t, "name")}
		}), zeroOf[wire.RemovePluginRequest]()},
		{"RemovePluginReply", rapid.Just[wire.Message](&wire.RemovePluginReply{}), zeroOf[wire.RemovePluginReply]()},
		{"SetPolicyRequest", custom(func(t *rapid.T) *wire.SetPolicyRequest {
			return &wire.SetPolicyRequest{
				Target: wire.PolicyTarget(rapid.IntRange(0, 1).Draw(t, "target")),
				Name:   genName(t, "consumer"), Policy: genPolicy(t),
			}
		}), zeroOf[wire.SetPolicyRequest]()},
		{"SetPolicyReply", rapid.Just[wire.Message](&wire.SetPolicyReply{}), zeroOf[wire.SetPolicyReply]()},
		{"ResetPluginRequest", custom(func(t *rapid.T) *wire.ResetPluginRequest {
			return &wire.ResetPluginRequest{Name: genName(t, "name")}
		}), zeroOf[wire.ResetPluginRequest]()},
		{"ResetPluginReply", custom(func(t *rapid.T) *wire.ResetPluginReply {
			return &wire.ResetPluginReply{Plugin: genPluginInfo(t)}
		}), zeroOf[wire.ResetPluginReply]()},
	}
}

func TestPluginEncodeRefusesWhatCannotDecode(t *testing.T) {
	long := strings.Repeat("x", wire.MaxNameLen+1)
	for _, c := range []struct {
		name string
		m    wire.Message
	}{
		{"long name", &wire.AddPluginRequest{Name: long, PluginKind: wire.PluginFilter}},
		{"unknown kind", &wire.AddPluginRequest{Name: "f", PluginKind: 5}},
		{"unknown target", &wire.SetPolicyRequest{Target: 2}},
		{"negative call time", &wire.ListPluginsReply{Plugins: []wire.PluginInfo{{Kind: 1, CallTime: -1}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := c.m.Encode([]byte("keep"))
			if !errors.Is(err, wire.StatusInvalidArgument) {
				t.Fatalf("err %v, want invalid argument", err)
			}
			if string(out) != "keep" {
				t.Fatalf("dst changed to %q", out)
			}
		})
	}
}

func FuzzDecodeAddPluginRequest(f *testing.F)    { fuzzDecoder(f, "AddPluginRequest") }
func FuzzDecodeAddPluginReply(f *testing.F)      { fuzzDecoder(f, "AddPluginReply") }
func FuzzDecodeListPluginsReply(f *testing.F)    { fuzzDecoder(f, "ListPluginsReply") }
func FuzzDecodeRemovePluginRequest(f *testing.F) { fuzzDecoder(f, "RemovePluginRequest") }
func FuzzDecodeSetPolicyRequest(f *testing.F)    { fuzzDecoder(f, "SetPolicyRequest") }
