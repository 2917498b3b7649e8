package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/transport/wire"
)

// Requests of the plugin kinds (0x0060–0x0063) and the plugin steps of a
// poll.

// servePlugins answers a request of a plugin kind.
func (r *request) servePlugins(ctx context.Context) []byte {
	switch r.frame.Kind {
	case wire.KindAddPlugin:
		return serve(ctx, r, &wire.AddPluginRequest{}, r.addPlugin)
	case wire.KindListPlugins:
		return serve(ctx, r, &wire.ListPluginsRequest{}, r.listPlugins)
	case wire.KindRemovePlugin:
		return serve(ctx, r, &wire.RemovePluginRequest{}, r.removePlugin)
	case wire.KindSetPolicy:
		return serve(ctx, r, &wire.SetPolicyRequest{}, r.setPolicy)
	}
	return wire.AppendErrorReply(nil, r.frame.FrameHeader, wire.StatusUnknownKind, fmt.Sprintf("%s is not served by this node", r.frame.Kind))
}

func (r *request) addPlugin(ctx context.Context, m *wire.AddPluginRequest) (*wire.AddPluginReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	info, err := r.n.plugins.add(ctx, m.Name, plugins.Kind(m.PluginKind), m.Module)
	if err != nil {
		return nil, err
	}
	return &wire.AddPluginReply{Plugin: pluginInfoToWire(info)}, nil
}

func (r *request) listPlugins(_ context.Context, _ *wire.ListPluginsRequest) (*wire.ListPluginsReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	infos := r.n.plugins.list()
	rep := &wire.ListPluginsReply{Plugins: make([]wire.PluginInfo, 0, len(infos))}
	for _, i := range infos {
		rep.Plugins = append(rep.Plugins, pluginInfoToWire(i))
	}
	return rep, nil
}

func (r *request) removePlugin(ctx context.Context, m *wire.RemovePluginRequest) (*wire.RemovePluginReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	return &wire.RemovePluginReply{}, r.n.plugins.remove(ctx, m.Name)
}

func (r *request) setPolicy(ctx context.Context, m *wire.SetPolicyRequest) (*wire.SetPolicyReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	if m.Target != wire.PolicyConsumer {
		return nil, invalidArgument("commit policies attach to named consumers; group policies are not served yet")
	}
	if m.Name == "" {
		return nil, invalidArgument("set-policy needs a consumer name")
	}
	return &wire.SetPolicyReply{}, r.n.plugins.setPolicy(ctx, m.Name, m.Policy)
}

// pollFilter is a filter a poll names, resolved once per poll.
type pollFilter struct {
	host   *plugins.Host
	name   string
	params plugins.Params
}

// filterOf resolves the filter of a poll: nil when it names none. An
// unknown plugin or one of the wrong kind fails the whole poll.
func (reg *pluginRegistry) filterOf(f wire.Filter) (*pollFilter, error) {
	if f.Name == "" {
		return nil, nil
	}
	if reg == nil {
		return nil, fmt.Errorf("%w: %q: this node runs no plugins", plugins.ErrUnknownPlugin, f.Name)
	}
	params, err := paramsOf(f.Params)
	if err != nil {
		return nil, err
	}
	info, err := reg.stat(f.Name)
	if err != nil {
		return nil, err
	}
	if info.Kind != plugins.KindFilter {
		return nil, fmt.Errorf("%w: %q is a %s, not a filter", plugins.ErrWrongKind, f.Name, info.Kind)
	}
	return &pollFilter{host: reg.host.Load(), name: f.Name, params: params}, nil
}

// transform returns the PollRequest.Transform of one partition: it runs
// the filter on the immutable read result, off the owner, and replaces
// the stored batches by the node-built batches of the kept records. The
// position is unchanged: the completion still moves the consumer to
// res.Next, past the records the filter dropped.
func (f *pollFilter) transform(topic string, partition uint32, maxBatchBytes int) func(context.Context, uint64, ReadResult) (ReadResult, error) {
	return func(ctx context.Context, from uint64, res ReadResult) (ReadResult, error) {
		v, err := plugins.NewView(plugins.PollResult{
			Topic: topic, Partition: int32(partition), From: from, Next: res.Next, Batches: res.Batches,
		})
		if err != nil {
			return ReadResult{}, err
		}
		keep, err := f.host.Filter(ctx, f.name, f.params, v)
		if err != nil {
			return ReadResult{}, err
		}
		batches, err := v.Filtered(keep, wire.CompressionNone, maxBatchBytes)
		if err != nil {
			return ReadResult{}, err
		}
		return ReadResult{Batches: batches, Next: res.Next}, nil
	}
}

// applyPolicy runs the commit policy attached to the poll's consumer, if
// any, on what the poll delivered, and turns its proposal into a commit
// carrying the poll's token: the owner applies it only if the token is
// still current, so a proposal from a poll that went stale (a purge, a new
// session) is dropped. A policy's failure does not fail the poll, whose
// records the completion already delivered: it is logged (and counted in
// the plugin's stats) and nothing is committed.
func (reg *pluginRegistry) applyPolicy(ctx context.Context, o *Owner, c Consumer, topic string, partition uint32, res PollResult) {
	if reg == nil || c.Name == "" || res.Token.Next <= res.Token.From {
		return
	}
	pol, ok := reg.policyOf(c.Name)
	host := reg.host.Load()
	if !ok || host == nil {
		return
	}
	v, err := plugins.NewView(plugins.PollResult{
		Topic: topic, Partition: int32(partition), From: res.Token.From, Next: res.Token.Next, Batches: res.Batches,
	})
	var prop plugins.Proposal
	if err == nil {
		prop, err = host.Propose(ctx, pol.Plugin, pol.Params, v)
	}
	if err != nil {
		reg.log.Warn("commit policy failed; nothing committed", "plugin", pol.Plugin, "consumer", c.Name,
			"topic", topic, "partition", partition, "err", err)
		return
	}
	if !prop.Commit {
		return
	}
	if hook := reg.beforePolicyCommit.Load(); hook != nil {
		(*hook)()
	}
	err = o.Commit(ctx, CommitRequest{Consumer: c, Token: res.Token, Offset: prop.Through + 1})
	if _, fenced := fence.CodeOf(err); fenced {
		reg.log.Debug("stale commit-policy proposal dropped", "plugin", pol.Plugin, "consumer", c.Name,
			"topic", topic, "partition", partition, "through", prop.Through, "err", err)
		return
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		reg.log.Warn("commit-policy commit failed", "plugin", pol.Plugin, "consumer", c.Name,
			"topic", topic, "partition", partition, "err", err)
	}
}
