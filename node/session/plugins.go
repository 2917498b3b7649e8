package session

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/pluginreg"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/transport/wire"
)

// Requests of the plugin kinds (0x0060–0x0064) and the plugin steps of a
// poll.

func (r *Call) AddPlugin(ctx context.Context, m *wire.AddPluginRequest) (*wire.AddPluginReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	info, err := r.s.n.Plugins().Add(ctx, m.Name, plugins.Kind(m.PluginKind), m.Module)
	if err != nil {
		return nil, err
	}
	return &wire.AddPluginReply{Plugin: pluginreg.InfoToWire(info)}, nil
}

func (r *Call) ListPlugins(_ context.Context, _ *wire.ListPluginsRequest) (*wire.ListPluginsReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	infos := r.s.n.Plugins().List()
	rep := &wire.ListPluginsReply{Plugins: make([]wire.PluginInfo, 0, len(infos))}
	for _, i := range infos {
		rep.Plugins = append(rep.Plugins, i.PluginInfo)
	}
	return rep, nil
}

func (r *Call) ResetPlugin(ctx context.Context, m *wire.ResetPluginRequest) (*wire.ResetPluginReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	info, err := r.s.n.Plugins().Reset(ctx, m.Name)
	if err != nil {
		return nil, err
	}
	return &wire.ResetPluginReply{Plugin: info}, nil
}

func (r *Call) RemovePlugin(ctx context.Context, m *wire.RemovePluginRequest) (*wire.RemovePluginReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	return &wire.RemovePluginReply{}, r.s.n.Plugins().Remove(ctx, m.Name)
}

func (r *Call) SetPolicy(ctx context.Context, m *wire.SetPolicyRequest) (*wire.SetPolicyReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	switch {
	case m.Name == "" && m.Target == wire.PolicyGroup:
		return nil, invalidArgument("set-policy needs a group name")
	case m.Name == "":
		return nil, invalidArgument("set-policy needs a consumer name")
	case m.Target == wire.PolicyGroup:
		pol, err := r.s.n.Plugins().CheckPolicy(m.Policy)
		if err != nil {
			return nil, err
		}
		return &wire.SetPolicyReply{}, r.s.n.Groups().SetPolicy(ctx, m.Name, pol)
	}
	return &wire.SetPolicyReply{}, r.s.n.Plugins().SetPolicy(ctx, m.Name, m.Policy)
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
func (r *Call) applyPolicy(ctx context.Context, o *owner.Owner, c owner.Consumer, topic string, partition uint32, res owner.PollResult) {
	reg := r.s.n.Plugins()
	if reg == nil || c.Name == "" || res.Token.Next <= res.Token.From {
		return
	}
	var pol group.PolicyRecord
	var ok bool
	if c.Member != "" {
		pol, ok = r.s.n.Groups().Policy(c.Name)
	} else {
		pol, ok = reg.PolicyOf(c.Name)
	}
	if ok {
		reg.RunPolicy(ctx, o, c, pol, topic, partition, res)
	}
}
