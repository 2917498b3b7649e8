package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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
	switch {
	case m.Name == "" && m.Target == wire.PolicyGroup:
		return nil, invalidArgument("set-policy needs a group name")
	case m.Name == "":
		return nil, invalidArgument("set-policy needs a consumer name")
	case m.Target == wire.PolicyGroup:
		pol, err := r.n.plugins.checkPolicy(m.Policy)
		if err != nil {
			return nil, err
		}
		return &wire.SetPolicyReply{}, r.n.groups.SetPolicy(ctx, m.Name, pol)
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
		// The filtered batches are copies: the view's memory goes back
		// for the next poll's.
		defer v.Release()
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
// token covers only that poll's positions. Without a filter, or for an
// immediate poll, it is PollMany.
func pollKept(ctx context.Context, polls []PartitionPoll, maxWait time.Duration) []PartitionResult {
	if maxWait <= 0 || !hasTransform(polls) {
		return PollMany(ctx, polls, maxWait)
	}
	deadline := time.Now().Add(maxWait)
	out := PollMany(ctx, polls, maxWait)
	polls = slices.Clone(polls)
	for {
		var again []PartitionPoll
		var where []int
		moved := false
		for i, res := range out {
			if res.Err != nil {
				continue
			}
			if len(res.Result.Batches) > 0 {
				return out
			}
			moved = moved || res.Result.Token.Next > res.Result.Token.From
			req := &polls[i].Request
			if req.From != FromNext {
				req.From, req.Offset = FromOffset, res.Result.Next
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
		for j, res := range PollMany(ctx, again, left) {
			out[where[j]] = res
		}
	}
}

func hasTransform(polls []PartitionPoll) bool {
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
func (n *Node) applyPolicy(ctx context.Context, o *Owner, c Consumer, topic string, partition uint32, res PollResult) {
	if n.plugins == nil || c.Name == "" || res.Token.Next <= res.Token.From {
		return
	}
	var pol policyRecord
	var ok bool
	if c.Member != "" {
		pol, ok = n.groups.Policy(c.Name)
	} else {
		pol, ok = n.plugins.policyOf(c.Name)
	}
	if ok {
		n.plugins.runPolicy(ctx, o, c, pol, topic, partition, res)
	}
}

// runPolicy runs the commit policy pol on what a poll delivered, and
// turns its proposal into a commit carrying the poll's token: the owner
// applies it only if the token is still current, so a proposal from a
// poll that went stale (a purge, a new session, a member fenced or its
// partition moved) is dropped. A policy's failure does not fail the poll,
// whose records the completion already delivered: it is logged (and
// counted in the plugin's stats) and nothing is committed.
func (reg *pluginRegistry) runPolicy(ctx context.Context, o *Owner, c Consumer, pol policyRecord, topic string, partition uint32, res PollResult) {
	host := reg.host.Load()
	if host == nil {
		return
	}
	who := c.Name
	if c.Member != "" {
		who = c.Name + "/" + c.Member
	}
	v, err := plugins.NewView(plugins.PollResult{
		Topic: topic, Partition: int32(partition), From: res.Token.From, Next: res.Token.Next, Batches: res.Batches,
	})
	var prop plugins.Proposal
	if err == nil {
		prop, err = host.Propose(ctx, pol.Plugin, pol.Params, v)
		v.Release()
	}
	if err != nil {
		reg.log.Warn("commit policy failed; nothing committed", "plugin", pol.Plugin, "consumer", who,
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
		reg.log.Debug("stale commit-policy proposal dropped", "plugin", pol.Plugin, "consumer", who,
			"topic", topic, "partition", partition, "through", prop.Through, "err", err)
		return
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		reg.log.Warn("commit-policy commit failed", "plugin", pol.Plugin, "consumer", who,
			"topic", topic, "partition", partition, "err", err)
	}
}
