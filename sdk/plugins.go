package sdk

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// PluginKind says what a plugin does: PluginFilter, PluginCommitPolicy or
// PluginTransform.
type PluginKind = wire.PluginKind

// Plugin kinds.
const (
	// PluginFilter plugins decide, on the node, which records of a poll a
	// consumer receives (WithFilter).
	PluginFilter = wire.PluginFilter
	// PluginCommitPolicy plugins decide what a named consumer's automatic
	// commit is (WithCommitPolicy, SetCommitPolicy).
	PluginCommitPolicy = wire.PluginCommitPolicy
	// PluginTransform plugins turn records into output records, keeping
	// a state between batches.
	PluginTransform = wire.PluginTransform
)

// PluginInfo describes a plugin registered on the node, with its counters
// since the node started.
type PluginInfo struct {
	Name string
	Kind PluginKind
	// Digest is the SHA-256 of the module, in hex.
	Digest string
	// Size is the module's size in bytes.
	Size  int
	Added time.Time
	// Calls counts the plugin's calls, Failures those that failed (of
	// which Timeouts, Traps and InvalidAnswers by cause); RecordsIn and
	// RecordsOut the records shown to it and those its filters kept.
	Calls, Failures, RecordsIn, RecordsOut uint64
	Timeouts, Traps, InvalidAnswers        uint64
	CallTime                               time.Duration
	// MemoryPages is the linear memory of its live instances (64 KiB
	// pages).
	MemoryPages uint64
	// Quarantined: the plugin failed too often; the node refuses to call
	// it until an operator resets it (ResetPlugin) or adds its module
	// again. The quarantine survives restarts of the node.
	Quarantined bool
	// State is "ok", "quarantined", "loading" (the node started recently
	// and is still loading it) or "not loaded" (its module could not be
	// loaded); Reason says why a plugin is quarantined or not loaded.
	State, Reason string
}

func pluginInfoFromWire(p wire.PluginInfo) PluginInfo {
	return PluginInfo{
		Name: p.Name, Kind: p.Kind, Digest: fmt.Sprintf("%x", p.Digest), Size: int(p.Size), Added: p.Added,
		Calls: p.Calls, Failures: p.Failures, RecordsIn: p.RecordsIn, RecordsOut: p.RecordsOut,
		Timeouts: p.Timeouts, Traps: p.Traps, InvalidAnswers: p.InvalidAnswers, CallTime: p.CallTime,
		MemoryPages: p.MemoryPages, Quarantined: p.Quarantined, State: p.State.String(), Reason: p.Reason,
	}
}

// ResetPlugin clears the quarantine (and the strikes) of the plugin
// called name: it serves polls again, and stays reset across restarts.
// Needs the admin scope.
func (c *Client) ResetPlugin(ctx context.Context, name string) (PluginInfo, error) {
	var rep wire.ResetPluginReply
	if err := c.call(ctx, &wire.ResetPluginRequest{Name: name}, &rep); err != nil {
		return PluginInfo{}, err
	}
	return pluginInfoFromWire(rep.Plugin), nil
}

// AddPlugin registers the WebAssembly module wasm on the node under name,
// replacing a plugin of that name. The node compiles it before it
// answers (a Go plugin takes about half a second the first time) and
// keeps it across restarts. A module that does not load (not the plugin
// ABI, a disallowed import, too large) fails with StatusInvalidArgument
// and the reason: fix the module; do not retry. Needs the admin scope.
func (c *Client) AddPlugin(ctx context.Context, name string, kind PluginKind, wasm []byte) (PluginInfo, error) {
	var rep wire.AddPluginReply
	if err := c.call(ctx, &wire.AddPluginRequest{Name: name, PluginKind: kind, Module: wasm}, &rep); err != nil {
		return PluginInfo{}, err
	}
	return pluginInfoFromWire(rep.Plugin), nil
}

// ListPlugins lists the node's plugins by name. Needs the admin scope.
func (c *Client) ListPlugins(ctx context.Context) ([]PluginInfo, error) {
	var rep wire.ListPluginsReply
	if err := c.call(ctx, &wire.ListPluginsRequest{}, &rep); err != nil {
		return nil, err
	}
	out := make([]PluginInfo, len(rep.Plugins))
	for i, p := range rep.Plugins {
		out[i] = pluginInfoFromWire(p)
	}
	return out, nil
}

// RemovePlugin removes the plugin called name. Polls naming it fail from
// then on. An unknown name fails with ErrUnknownPlugin. Needs the admin
// scope.
func (c *Client) RemovePlugin(ctx context.Context, name string) error {
	return c.call(ctx, &wire.RemovePluginRequest{Name: name}, &wire.RemovePluginReply{})
}

// SetCommitPolicy attaches the commit policy plugin policy, with its
// parameters, to the named consumer: from then on each of its polls runs
// the policy on what it delivered, and the node commits what the policy
// proposes, fenced by the poll's token (a proposal from a poll that went
// stale is dropped). An empty policy detaches it. Needs the admin scope.
func (c *Client) SetCommitPolicy(ctx context.Context, consumer, policy string, params map[string]string) error {
	req := &wire.SetPolicyRequest{Target: wire.PolicyConsumer, Name: consumer, Policy: filterToWire(policy, params)}
	return c.call(ctx, req, &wire.SetPolicyReply{})
}

// filterToWire encodes a plugin name and parameters, keys sorted.
func filterToWire(name string, params map[string]string) wire.Filter {
	f := wire.Filter{Name: name}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		f.Params = append(f.Params, wire.FilterParam{Key: k, Value: params[k]})
	}
	return f
}

// WithFilter runs the filter plugin name, with params, on the node over
// every poll: the consumer receives only the records it keeps, in batches
// the node builds, and its position still moves past the records the
// filter dropped (committing a poll commits them too).
//
// Default: no filter. A filter that fails (a timeout, a trap, an unknown
// name) fails the poll with the plugin's error and moves nothing.
func WithFilter(name string, params map[string]string) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.filter = filterToWire(name, params) })
}

// WithCommitPolicy attaches the commit policy plugin name, with params,
// to the consumer when NewConsumer attaches it (SetCommitPolicy): the node
// then commits what the policy proposes after each poll. It needs a named
// consumer (WithConsumerName) and a token with the admin scope; the
// policy stays attached to the name until it is replaced or detached.
//
// Default: none (commits follow WithAutoCommit).
func WithCommitPolicy(name string, params map[string]string) ConsumerOption {
	return consumerOption(func(c *consumerConfig) {
		p := filterToWire(name, params)
		c.commitPolicy = &p
	})
}
