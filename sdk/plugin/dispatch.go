package plugin

import (
	"errors"
	"fmt"

	"github.com/ledgemq/ledge/plugins/abi"
)

// kernel is one instance's configured filter, policy and transform: what
// ledge_init set up, used by ledge_filter, ledge_propose and
// ledge_transform. The WebAssembly exports and RunFilter, RunCommitPolicy
// and RunTransform share it.
type kernel struct {
	filter    BatchFilter
	policy    CommitPolicy
	transform Transform
	batch     Batch
	out       Output
	state     State
}

// init configures the kernel for kind with the encoded parameters.
func (k *kernel) init(kind int32, enc []byte) error {
	ps, err := abi.DecodeParams(enc)
	if err != nil {
		return err
	}
	m := make(map[string]string, len(ps))
	for _, p := range ps {
		m[p.Key] = p.Value
	}
	params := Params{m: m}
	switch kind {
	case abi.KindFilter:
		switch {
		case registry.batchFilter != nil:
			f, err := registry.batchFilter(params)
			if err != nil {
				return err
			}
			k.filter = f
		case registry.recordFilter != nil:
			f, err := registry.recordFilter(params)
			if err != nil {
				return err
			}
			k.filter = func(b *Batch, keep Bitmap) error {
				for i := 0; i < b.Len(); i++ {
					if f(b.Record(i)) {
						keep.Keep(i)
					}
				}
				return nil
			}
		default:
			return errors.New("this plugin registers no filter")
		}
		if k.filter == nil {
			return errors.New("the filter setup returned no filter")
		}
	case abi.KindCommitPolicy:
		if registry.commitPolicy == nil {
			return errors.New("this plugin registers no commit policy")
		}
		p, err := registry.commitPolicy(params)
		if err != nil {
			return err
		}
		if p == nil {
			return errors.New("the commit policy setup returned no policy")
		}
		k.policy = p
	case abi.KindTransform:
		if registry.transform == nil {
			return errors.New("this plugin registers no transform")
		}
		t, err := registry.transform(params)
		if err != nil {
			return err
		}
		if t == nil {
			return errors.New("the transform setup returned no transform")
		}
		k.transform = t
	default:
		return fmt.Errorf("unknown plugin kind %d", kind)
	}
	return nil
}

// runFilter runs the filter over an input region and returns the size of
// the answer it wrote.
func (k *kernel) runFilter(region []byte) (int32, error) {
	if k.filter == nil {
		return 0, errors.New("ledge_filter called on an instance not initialized as a filter")
	}
	v, err := abi.Parse(region)
	if err != nil {
		return 0, err
	}
	k.batch.v = v
	keep := abi.BitmapOver(v.Answer(), v.Len())
	if err := k.filter(&k.batch, keep); err != nil {
		return 0, err
	}
	return int32(abi.BitmapSize(v.Len())), nil
}

// runPropose runs the policy over an input region and returns the size of
// the answer it wrote.
func (k *kernel) runPropose(region []byte) (int32, error) {
	if k.policy == nil {
		return 0, errors.New("ledge_propose called on an instance not initialized as a commit policy")
	}
	v, err := abi.Parse(region)
	if err != nil {
		return 0, err
	}
	k.batch.v = v
	p, err := k.policy(&k.batch)
	if err != nil {
		return 0, err
	}
	p.Put(v.Answer())
	return abi.ProposalSize, nil
}
