package wire_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
	"pgregory.net/rapid"
)

// The plugin messages (kinds 0x0060–0x0063) get the same round-trip,
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
	}
}

func pluginMessageCaseNamed(tb testing.TB, name string) messageCase {
	for _, c := range pluginMessageCases() {
		if c.name == name {
			return c
		}
	}
	tb.Fatalf("no plugin message case %q", name)
	return messageCase{}
}

func TestPluginMessageRoundTrip(t *testing.T) {
	for _, c := range pluginMessageCases() {
		t.Run(c.name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				m := c.gen.Draw(rt, "message")
				out, err := m.Encode([]byte("prefix"))
				if err != nil {
					rt.Fatalf("encode: %v", err)
				}
				body := out[len("prefix"):]
				got := c.zero()
				if err := got.Decode(body); err != nil {
					rt.Fatalf("decode: %v", err)
				}
				if !reflect.DeepEqual(got, m) {
					rt.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
				}
				reused := c.zero()
				other, err := c.gen.Draw(rt, "other").Encode(nil)
				if err != nil {
					rt.Fatalf("encode other: %v", err)
				}
				if err := reused.Decode(other); err != nil {
					rt.Fatalf("decode other: %v", err)
				}
				if err := reused.Decode(body); err != nil {
					rt.Fatalf("decode into reused: %v", err)
				}
				if again, _ := reused.Encode(nil); !bytes.Equal(again, body) {
					rt.Fatalf("decoding into a reused message kept old state:\n got %+v\nwant %+v", reused, m)
				}
			})
		})
	}
}

func TestPluginMessageTruncatedAndTrailing(t *testing.T) {
	for _, c := range pluginMessageCases() {
		t.Run(c.name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				body, err := c.gen.Draw(rt, "message").Encode(nil)
				if err != nil {
					rt.Fatalf("encode: %v", err)
				}
				for i := range len(body) {
					if err := c.zero().Decode(body[:i]); !errors.Is(err, wire.StatusMalformedRequest) {
						rt.Fatalf("prefix of %d/%d bytes: err %v", i, len(body), err)
					}
				}
				if err := c.zero().Decode(append(body, 0)); !errors.Is(err, wire.StatusMalformedRequest) {
					rt.Fatalf("trailing byte: err %v", err)
				}
			})
		})
	}
}

// Requests and replies of the plugin kinds travel in frames.
func TestPluginMessageFrames(t *testing.T) {
	for _, c := range pluginMessageCases() {
		t.Run(c.name, func(t *testing.T) {
			m := c.gen.Example(1)
			if !strings.HasSuffix(c.name, "Reply") {
				f, err := wire.ParseFrame(mustAppendRequest(t, m), wire.DefaultMaxFrameSize)
				if err != nil {
					t.Fatal(err)
				}
				got := c.zero()
				if err := wire.DecodeRequest(f, got); err != nil || !reflect.DeepEqual(got, m) {
					t.Fatalf("body: %+v, %v; want %+v", got, err, m)
				}
				return
			}
			stream, err := wire.AppendReply(nil, 7, m)
			if err != nil {
				t.Fatal(err)
			}
			f, err := wire.ReadFrame(bytes.NewReader(stream), nil, wire.DefaultMaxFrameSize)
			if err != nil {
				t.Fatal(err)
			}
			got := c.zero()
			if err := wire.DecodeReply(f, got); err != nil || !reflect.DeepEqual(got, m) {
				t.Fatalf("reply: %+v, %v; want %+v", got, err, m)
			}
		})
	}
}

func TestPluginEncodeRefusesWhatCannotDecode(t *testing.T) {
	long := strings.Repeat("x", wire.MaxNameLen+1)
	for _, c := range []struct {
		name string
		m    wire.Message
	}{
		{"long name", &wire.AddPluginRequest{Name: long, PluginKind: wire.PluginFilter}},
		{"unknown kind", &wire.AddPluginRequest{Name: "f", PluginKind: 3}},
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

func FuzzDecodeAddPluginRequest(f *testing.F)    { fuzzPluginDecoder(f, "AddPluginRequest") }
func FuzzDecodeAddPluginReply(f *testing.F)      { fuzzPluginDecoder(f, "AddPluginReply") }
func FuzzDecodeListPluginsReply(f *testing.F)    { fuzzPluginDecoder(f, "ListPluginsReply") }
func FuzzDecodeRemovePluginRequest(f *testing.F) { fuzzPluginDecoder(f, "RemovePluginRequest") }
func FuzzDecodeSetPolicyRequest(f *testing.F)    { fuzzPluginDecoder(f, "SetPolicyRequest") }

// fuzzPluginDecoder: arbitrary bytes never panic a decoder nor make it
// allocate more than allocBound, every rejection is malformed-request,
// every accepted input is canonical.
func fuzzPluginDecoder(f *testing.F, name string) {
	c := pluginMessageCaseNamed(f, name)
	f.Add([]byte{})
	for seed := range 8 {
		body, err := c.gen.Example(seed).Encode(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
		if len(body) > 0 {
			f.Add(body[:len(body)-1])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := c.zero()
		var err error
		if n := bytesAllocated(func() { err = m.Decode(b) }); n > allocBound(len(b)) {
			t.Fatalf("decoding %d bytes allocated %d", len(b), n)
		}
		if err != nil {
			if !errors.Is(err, wire.StatusMalformedRequest) {
				t.Fatalf("rejection is not malformed-request: %v", err)
			}
			return
		}
		out, err := m.Encode(nil)
		if err != nil {
			t.Fatalf("accepted input does not encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("accepted input is not canonical:\n in % x\nout % x", b, out)
		}
	})
}
