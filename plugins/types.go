package plugins

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/ledgemq/ledge/plugins/abi"
)

// Kind is what a plugin does.
type Kind uint8

// Plugin kinds.
const (
	// KindFilter plugins decide which records of a poll a consumer
	// receives, answering with a Bitmap.
	KindFilter Kind = abi.KindFilter
	// KindCommitPolicy plugins decide what a consumer's automatic commit
	// should be, answering with a Proposal.
	KindCommitPolicy Kind = abi.KindCommitPolicy
	// KindTransform plugins turn a batch of records into zero or more
	// output records per input, keeping a state between batches,
	// answering with Outputs and the new state.
	KindTransform Kind = abi.KindTransform
)

// String returns "filter", "commit-policy" or "transform".
func (k Kind) String() string {
	switch k {
	case KindFilter:
		return "filter"
	case KindCommitPolicy:
		return "commit-policy"
	case KindTransform:
		return "transform"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind maps "filter", "commit-policy" and "transform" to their Kind.
func ParseKind(s string) (Kind, error) {
	switch s {
	case "filter":
		return KindFilter, nil
	case "commit-policy":
		return KindCommitPolicy, nil
	case "transform":
		return KindTransform, nil
	}
	return 0, fmt.Errorf("plugins: unknown plugin kind %q (want filter, commit-policy or transform)", s)
}

// Digest identifies a module: the SHA-256 of its bytes.
type Digest [32]byte

// String returns the digest in hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// Bitmap is a filter's answer: bit i set keeps record i of the View.
type Bitmap = abi.Bitmap

// Proposal is a commit policy's answer: nothing, or commit through an
// offset of the View's delivered range.
type Proposal = abi.Proposal

// Params are the key=value parameters of a plugin call, given to the
// plugin's init. Instances are initialized once per parameter set and
// reused for calls with equal parameters.
type Params map[string]string

// Limits of Params, the same as the wire protocol's for filter parameters.
const (
	MaxParams        = 64
	MaxParamKeyLen   = 255
	MaxParamValueLen = 4096
)

// ParseParams parses "key=value" strings (as given on a command line).
func ParseParams(kvs []string) (Params, error) {
	p := Params{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%w: %q is not key=value", ErrBadParams, kv)
		}
		if _, dup := p[k]; dup {
			return nil, fmt.Errorf("%w: %q given twice", ErrBadParams, k)
		}
		p[k] = v
	}
	return p, p.check()
}

func (p Params) check() error {
	if len(p) > MaxParams {
		return fmt.Errorf("%w: %d parameters, the limit is %d", ErrBadParams, len(p), MaxParams)
	}
	for k, v := range p {
		switch {
		case k == "":
			return fmt.Errorf("%w: empty key", ErrBadParams)
		case len(k) > MaxParamKeyLen:
			return fmt.Errorf("%w: key %.20q... is %d bytes, the limit is %d", ErrBadParams, k, len(k), MaxParamKeyLen)
		case len(v) > MaxParamValueLen:
			return fmt.Errorf("%w: value of %q is %d bytes, the limit is %d", ErrBadParams, k, len(v), MaxParamValueLen)
		}
	}
	return nil
}

// encode returns the ABI encoding of p, keys sorted; it doubles as the key
// under which instances initialized with p are pooled.
func (p Params) encode() ([]byte, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	ps := make([]abi.Param, len(keys))
	for i, k := range keys {
		ps[i] = abi.Param{Key: k, Value: p[k]}
	}
	return abi.AppendParams(nil, ps), nil
}
