package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/ledgemq/ledge/node/transform"
	"github.com/ledgemq/ledge/transport/wire"
)

// Handlers of the transform admin requests, served by the node's
// transform manager. A transform reads one topic and writes another: each
// request needs the admin scope on both.

func transformRequestError(err error) error {
	if errors.Is(err, transform.ErrConfig) || errors.Is(err, transform.ErrExists) || errors.Is(err, transform.ErrNoTransform) {
		return invalidArgument(err.Error())
	}
	return err
}

// refuseTransformGroup refuses to let a client join or delete a
// transform's internal group: only the node's transform is its member,
// and its offsets and state are the transform's exactly-once record
// (remove the transform instead).
func refuseTransformGroup(group, what string) error {
	if transform.IsInternalGroup(group) {
		return invalidArgument(fmt.Sprintf("group %q is a transform's: it is not %s by clients (ledge transform remove removes it)", group, what))
	}
	return nil
}

// allowTransform checks the admin scope on both topics of transform name.
func (r *Call) allowTransform(name string) (transform.Info, error) {
	info, err := r.s.n.Transforms().Status(name)
	if err != nil {
		if err := r.allow("", wire.ScopeAdmin); err != nil {
			return transform.Info{}, err
		}
		return transform.Info{}, transformRequestError(err)
	}
	if err := r.allow(info.Spec.From, wire.ScopeAdmin); err != nil {
		return transform.Info{}, err
	}
	if err := r.allow(info.Spec.To, wire.ScopeAdmin); err != nil {
		return transform.Info{}, err
	}
	return info, nil
}

func (r *Call) AddTransform(ctx context.Context, m *wire.AddTransformRequest) (*wire.AddTransformReply, error) {
	if err := r.allow(m.Spec.From, wire.ScopeAdmin); err != nil {
		return nil, err
	}
	if err := r.allow(m.Spec.To, wire.ScopeAdmin); err != nil {
		return nil, err
	}
	spec := transform.Spec{Name: m.Spec.Name, Plugin: m.Spec.Plugin, From: m.Spec.From, To: m.Spec.To}
	if len(m.Spec.Params) > 0 {
		spec.Params = make(map[string]string, len(m.Spec.Params))
		for _, p := range m.Spec.Params {
			if _, dup := spec.Params[p.Key]; dup {
				return nil, invalidArgument("transform: parameter " + p.Key + " given twice")
			}
			spec.Params[p.Key] = p.Value
		}
	}
	if err := r.s.n.Transforms().Add(ctx, spec); err != nil {
		return nil, transformRequestError(err)
	}
	return &wire.AddTransformReply{}, nil
}

func (r *Call) ListTransforms(_ context.Context, _ *wire.ListTransformsRequest) (*wire.ListTransformsReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	rep := &wire.ListTransformsReply{}
	for _, info := range r.s.n.Transforms().List() {
		if r.s.tok.Sees(info.Spec.From) && r.s.tok.Sees(info.Spec.To) {
			rep.Transforms = append(rep.Transforms, transformInfoToWire(info))
		}
	}
	return rep, nil
}

func (r *Call) TransformStatus(_ context.Context, m *wire.TransformStatusRequest) (*wire.TransformStatusReply, error) {
	info, err := r.allowTransform(m.Name)
	if err != nil {
		return nil, err
	}
	return &wire.TransformStatusReply{Transform: transformInfoToWire(info)}, nil
}

func (r *Call) PauseTransform(ctx context.Context, m *wire.PauseTransformRequest) (*wire.PauseTransformReply, error) {
	if _, err := r.allowTransform(m.Name); err != nil {
		return nil, err
	}
	if err := r.s.n.Transforms().Pause(ctx, m.Name); err != nil {
		return nil, transformRequestError(err)
	}
	return &wire.PauseTransformReply{}, nil
}

func (r *Call) ResumeTransform(ctx context.Context, m *wire.ResumeTransformRequest) (*wire.ResumeTransformReply, error) {
	if _, err := r.allowTransform(m.Name); err != nil {
		return nil, err
	}
	if err := r.s.n.Transforms().Resume(ctx, m.Name); err != nil {
		return nil, transformRequestError(err)
	}
	return &wire.ResumeTransformReply{}, nil
}

func (r *Call) RemoveTransform(ctx context.Context, m *wire.RemoveTransformRequest) (*wire.RemoveTransformReply, error) {
	if _, err := r.allowTransform(m.Name); err != nil {
		return nil, err
	}
	if err := r.s.n.Transforms().Remove(ctx, m.Name); err != nil {
		return nil, transformRequestError(err)
	}
	return &wire.RemoveTransformReply{}, nil
}

func transformInfoToWire(info transform.Info) wire.TransformInfo {
	s := info.Spec
	out := wire.TransformInfo{
		Spec:  wire.TransformSpec{Name: s.Name, Plugin: s.Plugin, From: s.From, To: s.To, Paused: s.Paused},
		Error: info.Error,
	}
	for _, k := range slices.Sorted(maps.Keys(s.Params)) {
		out.Spec.Params = append(out.Spec.Params, wire.FilterParam{Key: k, Value: s.Params[k]})
	}
	for _, p := range info.Partitions {
		wp := wire.TransformPartitionStatus{
			Partition: p.Partition, Running: p.Running, Committed: p.Committed, HighWatermark: p.HighWatermark,
			Lag: p.Lag, RecordsIn: p.RecordsIn, RecordsOut: p.RecordsOut, PluginFailures: p.PluginFailures,
			Errors: p.Errors, LastError: p.LastError,
		}
		if !p.LastErrorAt.IsZero() {
			wp.LastErrorAt = p.LastErrorAt.UnixNano()
		}
		out.Partitions = append(out.Partitions, wp)
	}
	return out
}
