package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/record"
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
		rep.Plugins = append(rep.Plugins, i.PluginInfo)
	}
	return rep, nil
}

func (r *request) resetPlugin(ctx context.Context, m *wire.ResetPluginRequest) (*wire.ResetPluginReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	info, err := r.n.plugins.reset(ctx, m.Name)
	if err != nil {
		return nil, err
	}
	return &wire.ResetPluginReply{Plugin: info}, nil
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

// errPluginBusy is a filter call that found every instance of its plugin
// busy for as long as the poll could wait (the memory budget's own
// refusal is plugins.ErrMemoryBudget); errPluginLoading a poll naming a
// plugin the node was still loading when the poll's wait ended. Both are
// momentary: the client may poll again.
var (
	errPluginBusy    = errors.New("node: plugin busy")
	errPluginLoading = errors.New("node: plugin loading")
)

// pollFilter is a filter a poll names, resolved once per poll.
type pollFilter struct {
	host   *plugins.Host
	name   string
	params plugins.Params
	// wait bounds each call, the wait for an instance included: the
	// poll's max wait, and at least minFilterWait plus the call's own
	// deadline. Past it the partition fails with errPluginBusy (or the
	// host's ErrMemoryBudget) rather than hanging until the client gives
	// up.
	wait time.Duration

	// struck is the first failure of the plugin in this poll that counted
	// a strike: the poll's other partitions (and its later reads) fail
	// with it without calling the plugin again, so one poll is one strike
	// whatever its partitions, and a looping filter costs one deadline.
	mu     sync.Mutex
	struck error
}

// filterOf resolves the filter of a poll: nil when it names none. A
// plugin the node is still loading is waited for, for at most maxWait
// (errPluginLoading after). An unknown plugin or one of the wrong kind
// fails the whole poll.
func (reg *pluginRegistry) filterOf(ctx context.Context, f wire.Filter, maxWait time.Duration) (*pollFilter, error) {
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
	if err := reg.awaitLoaded(ctx, f.Name, maxWait); err != nil {
		return nil, err
	}
	info, err := reg.stat(f.Name)
	if err != nil {
		return nil, err
	}
	if info.Kind != plugins.KindFilter {
		return nil, fmt.Errorf("%w: %q is a %s, not a filter", plugins.ErrWrongKind, f.Name, info.Kind)
	}
	callTimeout := reg.cfg.CallTimeout
	if callTimeout <= 0 {
		callTimeout = defaultPluginCallTimeout
	}
	return &pollFilter{host: reg.host.Load(), name: f.Name, params: params,
		wait: max(maxWait, minFilterWait+callTimeout)}, nil
}

// minFilterWait is how long a filter call of a poll that cannot wait
// (max wait 0) may wait for an instance of its plugin, on top of the
// call's deadline; defaultPluginCallTimeout is the host's default
// deadline (plugins.Config.CallTimeout).
// policyLoadWait is how long a commit policy's run waits for the plugin
// to load after a start.
const (
	policyLoadWait           = 10 * time.Second
	minFilterWait            = time.Second
	defaultPluginCallTimeout = 100 * time.Millisecond
)

// filter runs the plugin on v, or fails as it did earlier in the poll.
func (f *pollFilter) filter(ctx context.Context, v *plugins.View) (plugins.Bitmap, error) {
	f.mu.Lock()
	struck := f.struck
	f.mu.Unlock()
	if struck != nil {
		return plugins.Bitmap{}, fmt.Errorf("%w (on another partition of this poll; not run again)", struck)
	}
	fctx, cancel := context.WithTimeout(ctx, f.wait)
	defer cancel()
	keep, err := f.host.Filter(fctx, f.name, f.params, v)
	switch {
	case err == nil:
		return keep, nil
	case errors.Is(err, plugins.ErrTimeout), errors.Is(err, plugins.ErrTrap), errors.Is(err, plugins.ErrMemoryLimit),
		errors.Is(err, plugins.ErrInvalidAnswer), errors.Is(err, plugins.ErrQuarantined):
		f.mu.Lock()
		if f.struck == nil {
			f.struck = err
		}
		f.mu.Unlock()
	case !isPluginError(err) && ctx.Err() == nil && fctx.Err() != nil:
		// Waiting for an instance of the plugin ran out of time.
		err = fmt.Errorf("%w: filter %q could not run within %v (every instance busy): %w", errPluginBusy, f.name, f.wait, err)
	}
	return plugins.Bitmap{}, err
}

// isPluginError reports whether err is one of the plugin host's verdicts.
func isPluginError(err error) bool {
	for _, s := range [...]error{plugins.ErrTimeout, plugins.ErrTrap, plugins.ErrMemoryLimit, plugins.ErrInvalidAnswer, plugins.ErrPluginFailed,
		plugins.ErrQuarantined, plugins.ErrMemoryBudget, plugins.ErrUnknownPlugin, plugins.ErrWrongKind,
		plugins.ErrBadParams, plugins.ErrInputTooLarge, plugins.ErrClosed} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// transform returns the PollRequest.Transform of one partition: it runs
// the filter on the immutable read result, off the owner, and replaces
// the stored batches by the node-built batches of the kept records. The
// position is unchanged: the completion still moves the consumer to
// res.Next, past the records the filter dropped.
func (f *pollFilter) transform(topic string, partition uint32, maxBatchBytes int) func(context.Context, uint64, owner.ReadResult) (owner.ReadResult, error) {
	return func(ctx context.Context, from uint64, res owner.ReadResult) (owner.ReadResult, error) {
		v, err := plugins.NewView(plugins.PollResult{
			Topic: topic, Partition: int32(partition), From: from, Next: res.Next, Batches: res.Batches,
		})
		if err != nil {
			return owner.ReadResult{}, err
		}
		// The filtered batches are copies: the view's memory goes back
		// for the next poll's.
		defer v.Release()
		keep, err := f.filter(ctx, v)
		if err != nil {
			return owner.ReadResult{}, err
		}
		batches, err := v.Filtered(keep, record.CompressionNone, maxBatchBytes)
		if err != nil {
			return owner.ReadResult{}, err
		}
		return owner.ReadResult{Batches: batches, Next: res.Next}, nil
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
				if isPluginError(res.Err) || errors.Is(res.Err, errPluginBusy) {
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
func (reg *pluginRegistry) runPolicy(ctx context.Context, o *owner.Owner, c owner.Consumer, pol policyRecord, topic string, partition uint32, res owner.PollResult) {
	who := c.Name
	if c.Member != "" {
		who = c.Name + "/" + c.Member
	}
	// Just after a start the policy may still be loading: its proposal
	// waits for it, a while.
	if err := reg.awaitLoaded(ctx, pol.Plugin, policyLoadWait); err != nil {
		reg.log.Warn("commit policy not run; nothing committed", "plugin", pol.Plugin, "consumer", who,
			"topic", topic, "partition", partition, "err", err)
		return
	}
	host := reg.host.Load()
	if host == nil {
		return
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
	err = o.Commit(ctx, owner.CommitRequest{Consumer: c, Token: res.Token, Offset: prop.Through + 1})
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
