package plugin_test

import (
	"encoding/binary"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/plugins/abi"
)

// asConstants reads the `export const NAME: T = N;` lines of the
// AssemblyScript kit.
func asConstants(t *testing.T) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile("assemblyscript/ledge.ts")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, m := range regexp.MustCompile(`(?m)^export const ([A-Z_0-9]+): \w+ = (0x[0-9a-f]+|\d+);`).FindAllStringSubmatch(string(b), -1) {
		n, err := strconv.ParseUint(m[2], 0, 64)
		if err != nil {
			t.Fatal(err)
		}
		out[m[1]] = n
	}
	return out
}

// Every offset and value the AssemblyScript kit names is the one the
// host's encoder writes and its answer parser reads.
func TestAssemblyScriptKitMatchesTheABI(t *testing.T) {
	c := asConstants(t)
	var enc abi.Encoder
	enc.Reset(abi.Meta{Topic: "frames", Partition: 3, From: 10, Next: 14})
	enc.Add(10, 1700000000000, []byte("k"), []byte("v10"))
	enc.AddHeader("h", []byte("x"))
	enc.Add(12, -5, nil, []byte("v12"))
	enc.AddHeader("a", nil)
	enc.AddHeader("b", []byte("yz"))
	region := enc.AppendRegion(nil)
	le := binary.LittleEndian
	at := func(name string) uint64 {
		t.Helper()
		v, ok := c[name]
		if !ok {
			t.Fatalf("ledge.ts does not name %s", name)
		}
		return v
	}
	u32 := func(base uint64, name string) uint32 { return le.Uint32(region[base+at(name):]) }
	u64 := func(base uint64, name string) uint64 { return le.Uint64(region[base+at(name):]) }
	span := func(base uint64, off, n string) string {
		l := int32(u32(base, n))
		if l < 0 {
			return "<null>"
		}
		o := u32(base, off)
		return string(region[o : o+uint32(l)])
	}

	for name, want := range map[string]uint64{
		"ABI_VERSION": abi.Version, "KIND_FILTER": abi.KindFilter, "KIND_COMMIT_POLICY": abi.KindCommitPolicy,
		"INPUT_MAGIC": uint64(abi.InputMagic), "HEADER_SIZE": abi.HeaderSize,
		"RECORD_ENTRY_SIZE": abi.RecordEntrySize, "HEADER_ENTRY_SIZE": abi.HeaderEntrySize,
		"PROPOSAL_SIZE": abi.ProposalSize, "PROPOSE_NONE": abi.ProposeNone, "PROPOSE_COMMIT": abi.ProposeCommit,
		"LEVEL_DEBUG": abi.LevelDebug, "LEVEL_INFO": abi.LevelInfo, "LEVEL_WARN": abi.LevelWarn, "LEVEL_ERROR": abi.LevelError,
	} {
		if got := at(name); got != want {
			t.Errorf("%s = %d, the ABI's is %d", name, got, want)
		}
	}
	for name, want := range map[string]uint64{
		"HEADER_MAGIC": uint64(abi.InputMagic), "HEADER_VERSION": abi.Version, "HEADER_REGION_SIZE": uint64(len(region)),
		"HEADER_COUNT": 2, "HEADER_PARTITION": 3, "HEADER_RECORDS_OFF": abi.HeaderSize,
		"HEADER_HEADERS_OFF": abi.HeaderSize + 2*abi.RecordEntrySize, "HEADER_HEADER_COUNT": 3,
		"HEADER_ANSWER_OFF": uint64(len(region)) - uint64(u32(0, "HEADER_ANSWER_CAP")),
	} {
		if got := uint64(u32(0, name)); got != want {
			t.Errorf("the u32 at %s is %d, want %d", name, got, want)
		}
	}
	if from, next := u64(0, "HEADER_FROM"), u64(0, "HEADER_NEXT"); from != 10 || next != 14 {
		t.Errorf("HEADER_FROM, HEADER_NEXT read %d, %d; want 10, 14", from, next)
	}
	if got := span(0, "HEADER_TOPIC_OFF", "HEADER_TOPIC_LEN"); got != "frames" {
		t.Errorf("the topic at HEADER_TOPIC_OFF is %q", got)
	}

	second := uint64(u32(0, "HEADER_RECORDS_OFF")) + at("RECORD_ENTRY_SIZE")
	if o, ts := u64(second, "RECORD_OFFSET"), int64(u64(second, "RECORD_TIMESTAMP")); o != 12 || ts != -5 {
		t.Errorf("record 1: offset %d, timestamp %d; want 12, -5", o, ts)
	}
	if k, v := span(second, "RECORD_KEY_OFF", "RECORD_KEY_LEN"), span(second, "RECORD_VALUE_OFF", "RECORD_VALUE_LEN"); k != "<null>" || v != "v12" {
		t.Errorf("record 1: key %q, value %q; want <null>, v12", k, v)
	}
	first, count := u32(second, "RECORD_FIRST_HEADER"), u32(second, "RECORD_HEADER_COUNT")
	if first != 1 || count != 2 {
		t.Fatalf("record 1: headers from %d, %d of them; want 1, 2", first, count)
	}
	h := uint64(u32(0, "HEADER_HEADERS_OFF")) + uint64(first+1)*at("HEADER_ENTRY_SIZE")
	if k, v := span(h, "HEADER_ENTRY_KEY_OFF", "HEADER_ENTRY_KEY_LEN"), span(h, "HEADER_ENTRY_VALUE_OFF", "HEADER_ENTRY_VALUE_LEN"); k != "b" || v != "yz" {
		t.Errorf("header 2: %q=%q, want b=yz", k, v)
	}

	answer := make([]byte, abi.ProposalSize)
	le.PutUint32(answer[at("PROPOSAL_DECISION"):], uint32(at("PROPOSE_COMMIT")))
	le.PutUint64(answer[at("PROPOSAL_THROUGH"):], 12)
	if p, err := abi.ParseProposal(answer); err != nil || !p.Commit || p.Through != 12 {
		t.Errorf("a proposal written at PROPOSAL_DECISION and PROPOSAL_THROUGH parses as %+v, %v", p, err)
	}

	// A transform answer written at the kit's offsets parses as the host
	// reads it.
	if got := at("KIND_TRANSFORM"); got != abi.KindTransform {
		t.Errorf("KIND_TRANSFORM = %d, the ABI's is %d", got, abi.KindTransform)
	}
	if at("INPUT_HEADERS") != abi.InputHeaders || !strings.Contains(string(kitSource(t)), "export const FROM_INPUT: i32 = -2;") || abi.FromInput != -2 {
		t.Errorf("INPUT_HEADERS or FROM_INPUT differ from the ABI's")
	}
	if at("TRANSFORM_ANSWER_SIZE") != abi.TransformAnswerSize || at("OUTPUT_ENTRY_SIZE") != abi.OutputEntrySize {
		t.Errorf("TRANSFORM_ANSWER_SIZE, OUTPUT_ENTRY_SIZE = %d, %d; the ABI's are %d, %d",
			at("TRANSFORM_ANSWER_SIZE"), at("OUTPUT_ENTRY_SIZE"), abi.TransformAnswerSize, abi.OutputEntrySize)
	}
	ans := make([]byte, at("TRANSFORM_ANSWER_SIZE")+at("OUTPUT_ENTRY_SIZE"))
	le.PutUint32(ans, uint32(at("TRANSFORM_MAGIC")))
	le.PutUint32(ans[at("TRANSFORM_COUNT"):], 1)
	o := at("TRANSFORM_ANSWER_SIZE")
	le.PutUint32(ans[o+at("OUTPUT_INPUT"):], 1)
	le.PutUint64(ans[o+at("OUTPUT_TIMESTAMP"):], 42)
	le.PutUint32(ans[o+at("OUTPUT_KEY_LEN"):], 0xFFFFFFFF)
	le.PutUint32(ans[o+at("OUTPUT_VALUE_LEN"):], 2)
	le.PutUint32(ans[o+at("OUTPUT_HEADER_COUNT"):], 0)
	ans = append(ans, "v!st"...)
	le.PutUint32(ans[at("TRANSFORM_STATE_LEN"):], 2)
	in, _ := abi.Parse(region)
	a, err := abi.ParseTransformAnswer(ans, &in, 16)
	if err != nil || len(a.Outputs) != 1 || a.Outputs[0].Input != 1 || a.Outputs[0].Timestamp != 42 ||
		a.Outputs[0].Key != nil || string(a.Outputs[0].Value) != "v!" || string(a.State) != "st" {
		t.Errorf("a transform answer written at the kit's offsets parses as %+v, %v", a, err)
	}
}

// docs/PLUGINS.md shows the AssemblyScript example as it is built and
// tested (cmd/ledge's TestPluginAssemblyScriptTypedRecords).
func TestPluginsDocShowsTheAssemblyScriptExample(t *testing.T) {
	example, err := os.ReadFile("assemblyscript/examples/above/index.ts")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/PLUGINS.md")
	if err != nil {
		t.Fatal(err)
	}
	_, code, _ := strings.Cut(string(example), "import {")
	if !strings.Contains(string(doc), "import {"+strings.TrimRight(code, "\n")) {
		t.Error("docs/PLUGINS.md, Part 1b, no longer shows examples/above/index.ts from its import on: copy it there")
	}
}

func kitSource(t *testing.T) []byte {
	b, err := os.ReadFile("assemblyscript/ledge.ts")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
