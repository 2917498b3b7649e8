package sdk

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// TransformConfig is a transform: records of topic From go through the
// transform plugin Plugin (a plugin of kind transform, added with
// AddPlugin) with Params, and its outputs are appended to topic To,
// exactly once (docs/PIPELINES.md). The outputs of partition p of From
// go to partition p mod n of To (n its partitions), in input order.
type TransformConfig struct {
	Plugin   string
	From, To string
	Params   map[string]string
}

// Transform is a transform and its progress on each input partition.
type Transform struct {
	Name   string
	Config TransformConfig
	// Paused: stopped until ResumeTransform, across restarts too.
	Paused bool
	// Error is why the transform does not run (its topics are gone or
	// were re-created); empty while it runs.
	Error      string
	Partitions []TransformPartition
}

// TransformPartition is a transform's progress on one input partition.
type TransformPartition struct {
	Partition uint32
	// Running: the node holds the partition for the transform now.
	Running bool
	// Committed is the input offset below which every record's outputs
	// are in the output topic; Lag the records from it to HighWatermark.
	Committed, HighWatermark, Lag uint64
	// RecordsIn and RecordsOut count the records consumed and appended
	// since the transform last started on the node (a start, a resume).
	RecordsIn, RecordsOut uint64
	// PluginFailures counts the plugin's failed calls (a trap, a deadline,
	// a memory limit, an invalid answer), Errors every failure of the
	// partition (the plugin's included); a failure leaves the input where
	// it was. LastError is the latest, as the node said it, and
	// LastErrorAt when (both cleared by the next step that commits).
	PluginFailures, Errors uint64
	LastError              string
	LastErrorAt            time.Time
}

// AddTransform adds transform name and starts it at the first record of
// cfg.From. It needs the admin scope on both topics.
func (c *Client) AddTransform(ctx context.Context, name string, cfg TransformConfig) error {
	spec := wire.TransformSpec{Name: name, Plugin: cfg.Plugin, From: cfg.From, To: cfg.To}
	for _, k := range slices.Sorted(maps.Keys(cfg.Params)) {
		spec.Params = append(spec.Params, wire.FilterParam{Key: k, Value: cfg.Params[k]})
	}
	return c.call(ctx, &wire.AddTransformRequest{Spec: spec}, &wire.AddTransformReply{})
}

// ListTransforms lists the node's transforms by name. It needs the admin
// scope.
func (c *Client) ListTransforms(ctx context.Context) ([]Transform, error) {
	var reply wire.ListTransformsReply
	if err := c.call(ctx, &wire.ListTransformsRequest{}, &reply); err != nil {
		return nil, err
	}
	out := make([]Transform, len(reply.Transforms))
	for i := range reply.Transforms {
		out[i] = transformFromWire(reply.Transforms[i])
	}
	return out, nil
}

// TransformStatus returns transform name. It needs the admin scope.
func (c *Client) TransformStatus(ctx context.Context, name string) (Transform, error) {
	var reply wire.TransformStatusReply
	if err := c.call(ctx, &wire.TransformStatusRequest{Name: name}, &reply); err != nil {
		return Transform{}, err
	}
	return transformFromWire(reply.Transform), nil
}

// PauseTransform stops transform name until ResumeTransform, across
// restarts of the node too. It needs the admin scope.
func (c *Client) PauseTransform(ctx context.Context, name string) error {
	return c.call(ctx, &wire.PauseTransformRequest{Name: name}, &wire.PauseTransformReply{})
}

// ResumeTransform starts a paused transform where it stopped. It needs
// the admin scope.
func (c *Client) ResumeTransform(ctx context.Context, name string) error {
	return c.call(ctx, &wire.ResumeTransformRequest{Name: name}, &wire.ResumeTransformReply{})
}

// RemoveTransform stops and forgets transform name, with its progress
// and state: added again, it starts from the beginning. What it appended
// stays in the output topic. It needs the admin scope.
func (c *Client) RemoveTransform(ctx context.Context, name string) error {
	return c.call(ctx, &wire.RemoveTransformRequest{Name: name}, &wire.RemoveTransformReply{})
}

func transformFromWire(w wire.TransformInfo) Transform {
	t := Transform{Name: w.Spec.Name, Paused: w.Spec.Paused, Error: w.Error,
		Config: TransformConfig{Plugin: w.Spec.Plugin, From: w.Spec.From, To: w.Spec.To}}
	if len(w.Spec.Params) > 0 {
		t.Config.Params = make(map[string]string, len(w.Spec.Params))
		for _, p := range w.Spec.Params {
			t.Config.Params[p.Key] = p.Value
		}
	}
	for _, p := range w.Partitions {
		tp := TransformPartition{Partition: p.Partition, Running: p.Running, Committed: p.Committed,
			HighWatermark: p.HighWatermark, Lag: p.Lag, RecordsIn: p.RecordsIn, RecordsOut: p.RecordsOut,
			PluginFailures: p.PluginFailures, Errors: p.Errors, LastError: p.LastError}
		if p.LastErrorAt != 0 {
			tp.LastErrorAt = time.Unix(0, p.LastErrorAt)
		}
		t.Partitions = append(t.Partitions, tp)
	}
	return t
}
