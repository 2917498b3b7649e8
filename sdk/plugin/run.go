package plugin

import (
	"errors"
	"fmt"

	"github.com/ledgemq/ledge/plugins/abi"
)

// TestRecord is a record given to RunFilter or RunCommitPolicy.
type TestRecord struct {
	Offset    uint64
	Timestamp int64 // unix ms
	Key       []byte
	Value     []byte
	Headers   []TestHeader
}

// TestHeader is a header of a TestRecord. A nil Value is null.
type TestHeader struct {
	Key   string
	Value []byte
}

// Values returns records with the given values at offsets 0, 1, 2, ...
func Values(values ...string) []TestRecord {
	out := make([]TestRecord, len(values))
	for i, v := range values {
		out[i] = TestRecord{Offset: uint64(i), Value: []byte(v)}
	}
	return out
}

// RunFilter runs the registered filter, set up with params, over records
// (offsets increasing), through the same input encoding and answer checks
// as the host, and returns which records it kept. It is for a plugin's own
// tests in a native build.
func RunFilter(params map[string]string, records ...TestRecord) ([]bool, error) {
	k, region, err := setup(abi.KindFilter, params, records)
	if err != nil {
		return nil, err
	}
	n, err := k.runFilter(region)
	if err != nil {
		return nil, err
	}
	v, _ := abi.Parse(region)
	keep, err := abi.ParseBitmap(v.Answer()[:n], v.Len())
	if err != nil {
		return nil, err
	}
	out := make([]bool, v.Len())
	for i := range out {
		out[i] = keep.Kept(i)
	}
	return out, nil
}

// RunCommitPolicy runs the registered commit policy, set up with params,
// over records (offsets increasing), through the same input encoding and
// answer checks as the host, and returns its proposal.
func RunCommitPolicy(params map[string]string, records ...TestRecord) (Proposal, error) {
	k, region, err := setup(abi.KindCommitPolicy, params, records)
	if err != nil {
		return Proposal{}, err
	}
	n, err := k.runPropose(region)
	if err != nil {
		return Proposal{}, err
	}
	v, _ := abi.Parse(region)
	p, err := abi.ParseProposal(v.Answer()[:n])
	if err != nil {
		return Proposal{}, err
	}
	if p.Commit && (p.Through < v.From() || p.Through >= v.Next()) {
		return Proposal{}, fmt.Errorf("proposal commits through %d, outside the delivered range [%d, %d)", p.Through, v.From(), v.Next())
	}
	return p, nil
}

func setup(kind int32, params map[string]string, records []TestRecord) (*kernel, []byte, error) {
	if len(records) == 0 {
		return nil, nil, errors.New("no records: the host does not call plugins on empty results")
	}
	var ps []abi.Param
	for _, key := range (Params{m: params}).Keys() {
		ps = append(ps, abi.Param{Key: key, Value: params[key]})
	}
	k := &kernel{}
	if err := k.init(kind, abi.AppendParams(nil, ps)); err != nil {
		return nil, nil, err
	}
	var enc abi.Encoder
	first, last := records[0].Offset, records[len(records)-1].Offset
	enc.Reset(abi.Meta{Topic: "test", From: first, Next: last + 1})
	for i, r := range records {
		if i > 0 && r.Offset <= records[i-1].Offset {
			return nil, nil, fmt.Errorf("record %d: offset %d does not follow %d", i, r.Offset, records[i-1].Offset)
		}
		enc.Add(r.Offset, r.Timestamp, r.Key, r.Value)
		for _, h := range r.Headers {
			enc.AddHeader(h.Key, h.Value)
		}
	}
	return k, enc.AppendRegion(nil), nil
}

// TestOutput is an output record of RunTransform.
type TestOutput struct {
	// Input is the index, among the records given, of the record the
	// output comes from.
	Input     int
	Timestamp int64
	Key       []byte // nil: null
	Value     []byte // nil: null
	Headers   []TestHeader
}

// MaxTestState is the state limit RunTransform applies: the node's
// default.
const MaxTestState = 1 << 20

// RunTransform runs the registered transform, set up with params, over
// records (offsets increasing) with the state the previous batch left
// (nil at first), through the same input encoding and answer checks as
// the host, and returns its outputs and the new state to pass to the next
// RunTransform.
func RunTransform(params map[string]string, state []byte, records ...TestRecord) ([]TestOutput, []byte, error) {
	k, region, err := setup(abi.KindTransform, params, records)
	if err != nil {
		return nil, nil, err
	}
	ans, err := k.runTransform(region, state)
	if err != nil {
		return nil, nil, err
	}
	in, err := abi.Parse(region)
	if err != nil {
		return nil, nil, err
	}
	a, err := abi.ParseTransformAnswer(ans, &in, MaxTestState)
	if err != nil {
		return nil, nil, err
	}
	out := make([]TestOutput, len(a.Outputs))
	for i, o := range a.Outputs {
		t := TestOutput{Input: o.Input, Timestamp: o.Timestamp, Key: clone(o.Key), Value: clone(o.Value)}
		for _, h := range o.Headers {
			t.Headers = append(t.Headers, TestHeader{Key: string(h.Key), Value: clone(h.Value)})
		}
		if o.InputHeaders {
			t.Headers = append([]TestHeader(nil), records[o.Input].Headers...)
		}
		out[i] = t
	}
	return out, clone(a.State), nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
