package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/pluginreg"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/transport/wire"
)

// Requests of the plugin kinds (0x0060–0x0064) and the plugin steps of a
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
	case wire.KindResetPlugin:
		return serve(ctx, r, &wire.ResetPluginRequest{}, r.resetPlugin)
	}
	return wire.AppendErrorReply(nil, r.frame.FrameHeader, wire.StatusUnknownKind, fmt.Sprintf("%s is not served by this node", r.frame.Kind))
}

func (r *call) addPlugin(ctx context.Context, m *wire.AddPluginRequest) (*wire.AddPluginReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	info, err := r.n.plugins.Add(ctx, m.Name, plugins.Kind(m.PluginKind), m.Module)
	if err != nil {
		return nil, err
	}
	return &wire.AddPluginReply{Plugin: pluginreg.InfoToWire(info)}, nil
}

func (r *call) listPlugins(_ context.Context, _ *wire.ListPluginsRequest) (*wire.ListPluginsReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	infos := r.n.plugins.List()
	rep := &wire.ListPluginsReply{Plugins: make([]wire.PluginInfo, 0, len(infos))}
	for _, i := range infos {
		rep.Plugins = append(rep.Plugins, i.PluginInfo)
	}
	return rep, nil
}

func (r *call) resetPlugin(ctx context.Context, m *wire.ResetPluginRequest) (*wire.ResetPluginReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	info, err := r.n.plugins.Reset(ctx, m.Name)
	if err != nil {
		return nil, err
	}
	return &wire.ResetPluginReply{Plugin: info}, nil
}

func (r *call) removePlugin(ctx context.Context, m *wire.RemovePluginRequest) (*wire.RemovePluginReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	return &wire.RemovePluginReply{}, r.n.plugins.Remove(ctx, m.Name)
}

func (r *call) setPolicy(ctx context.Context, m *wire.SetPolicyRequest) (*wire.SetPolicyReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	switch {
	case m.Name == "" && m.Target == wire.PolicyGroup:
		return nil, invalidArgument("set-policy needs a group name")
	case m.Name == "":
		return nil, invalidArgument("set-policy needs a consumer name")
	case m.Target == wire.PolicyGroup:
		pol, err := r.n.plugins.CheckPolicy(m.Policy)
		if err != nil {
			return nil, err
		}
		return &wire.SetPolicyReply{}, r.n.groups.SetPolicy(ctx, m.Name, pol)
	}
	return &wire.SetPolicyReply{}, r.n.plugins.SetPolicy(ctx, m.Name, m.Policy)
}

// pollKept is PollMany for a poll whose partitions run a filter
// (PollRequest.Transform). A long poll whose filter dropped every record
// it read is not answered empty before its deadline: each partition's
// position has moved past the dropped records — the completion advanced
// a named consumer's or member's delivered position, and an explicit
// position continues at that partition's Next — and the poll parks again
// for what remains of maxWait, waking on new records. Partitions that
// failed keep their error and are not polled again. It answers as soon as
// a partition has records to deliver, every partition failed, or the
// deadline passed; each partition's result is its last poll's, whose
// token covers only that poll's positions. A partition whose filter
// failed ends the wait at once: the poll failed, and its client hears of
// it now. Without a filter, or for an immediate poll, it is PollMany.
func pollKept(ctx context.Context, polls []owner.PartitionPoll, maxWait time.Duration) []owner.PartitionResult {
	if maxWait <= 0 || !hasTransform(polls) {
		return owner.PollMany(ctx, polls, maxWait)
	}
	deadline := time.Now().Add(maxWait)
	out := owner.PollMany(ctx, polls, maxWait)
	polls = slices.Clone(polls)
	for {
		var again []owner.PartitionPoll
		var where []int
		moved := false
		for i, res := range out {
			if res.Err != nil {
				if pluginreg.IsPluginError(res.Err) || errors.Is(res.Err, pluginreg.ErrBusy) {
					return out // the poll failed because of its filter: say so now
				}
				continue
			}
			if len(res.Result.Batches) > 0 {
				return out
			}
			moved = moved || res.Result.Token.Next > res.Result.Token.From
			req := &polls[i].Request
			if req.From != owner.FromNext {
				req.From, req.Offset = owner.FromOffset, res.Result.Next
			}
			again = append(again, polls[i])
			where = append(where, i)
		}
		// Without a dropped record the poll answered for another reason
		// (its wait ran out): polling again would read nothing new.
		left := time.Until(deadline)
		if len(again) == 0 || !moved || left <= 0 || ctx.Err() != nil {
			return out
		}
		for j, res := range owner.PollMany(ctx, again, left) {
			out[where[j]] = res
		}
	}
}

func hasTransform(polls []owner.PartitionPoll) bool {
	for _, p := range polls {
		if p.Request.Transform != nil {
			return true
		}
	}
	return false
}

// applyPolicy runs the commit policy of the poll's consumer, if any, on
// what the poll delivered: for a group member the policy of its group,
// for a named consumer the one attached to its name (the two are
// separate even under one name).
func (n *Node) applyPolicy(ctx context.Context, o *owner.Owner, c owner.Consumer, topic string, partition uint32, res owner.PollResult) {
	if n.plugins == nil || c.Name == "" || res.Token.Next <= res.Token.From {
		return
	}
	var pol group.PolicyRecord
	var ok bool
	if c.Member != "" {
		pol, ok = n.groups.Policy(c.Name)
	} else {
		pol, ok = n.plugins.PolicyOf(c.Name)
	}
	if ok {
		n.plugins.RunPolicy(ctx, o, c, pol, topic, partition, res)
	}
}

// PluginsDir is the directory of the data directory holding plugin
// modules, and PluginsCacheDir the compilation cache (node/pluginreg).
const (
	PluginsDir      = pluginreg.Dir
	PluginsCacheDir = pluginreg.CacheDir
)

// WaitPluginsLoaded waits until the plugins registered when the node
// started are loaded (or failed to load, which is logged). The node
// serves meanwhile; a poll naming a plugin not loaded yet waits for it
// within its max wait.
func (n *Node) WaitPluginsLoaded(ctx context.Context) error { return n.plugins.WaitLoaded(ctx) }

// Plugins returns what the status page and /metrics read of the node's
// plugins (HTTPServer.AttachPlugins).
func (n *Node) Plugins() ops.PluginLister { return pluginStatuses{n.plugins} }

// pluginStatuses is ops.PluginLister over the registry's list.
type pluginStatuses struct{ reg *pluginreg.Registry }

func (p pluginStatuses) PluginStatuses() []ops.PluginStatus {
	infos := p.reg.List()
	out := make([]ops.PluginStatus, 0, len(infos))
	for _, i := range infos {
		out = append(out, ops.PluginStatus{
			Name: i.Name, Kind: i.Kind.String(), Calls: i.Calls, Failures: i.Failures,
			Timeouts: i.Timeouts, Traps: i.Traps, Strikes: i.Strikes, State: i.State.String(),
		})
	}
	return out
}
