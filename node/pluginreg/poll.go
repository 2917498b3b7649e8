package pluginreg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/wire"
)

// The plugin steps of a poll: a filter run on each partition's read
// result, and a commit policy run on what a poll delivered.

// ErrBusy is a filter call that found every worker of the plugin host,
// or every instance of its plugin, busy for as long as the poll could
// wait (plugins.ErrBusy; the memory budget's own refusal is
// plugins.ErrMemoryBudget); ErrLoading a poll naming a
// plugin the node was still loading when the poll's wait ended. Both are
// momentary: the client may poll again.
var (
	ErrBusy    = errors.New("pluginreg: plugin busy")
	ErrLoading = errors.New("pluginreg: plugin loading")
)

// Filter is a filter a poll names, resolved once per poll.
type Filter struct {
	host   *plugins.Host
	name   string
	params plugins.Params
	// wait bounds each call, the wait for an instance included: the
	// poll's max wait, and at least minFilterWait plus the call's own
	// deadline. Past it the partition fails with ErrBusy (or the
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

// FilterOf resolves the filter of a poll: nil when it names none. A
// plugin the node is still loading is waited for, for at most maxWait
// (ErrLoading after). An unknown plugin or one of the wrong kind
// fails the whole poll.
func (reg *Registry) FilterOf(ctx context.Context, f wire.Filter, maxWait time.Duration) (*Filter, error) {
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
	if err := reg.AwaitLoaded(ctx, f.Name, maxWait); err != nil {
		return nil, err
	}
	info, err := reg.Stat(f.Name)
	if err != nil {
		return nil, err
	}
	if info.Kind != plugins.KindFilter {
		return nil, fmt.Errorf("%w: %q is a %s, not a filter", plugins.ErrWrongKind, f.Name, info.Kind)
	}
	callTimeout := reg.cfg.CallTimeout
	if callTimeout <= 0 {
		callTimeout = plugins.DefaultCallTimeout
	}
	return &Filter{host: reg.host.Load(), name: f.Name, params: params,
		wait: max(maxWait, minFilterWait+callTimeout)}, nil
}

// minFilterWait is how long a filter call of a poll that cannot wait
// (max wait 0) may wait for a worker and an instance of its plugin, on
// top of the call's deadline (plugins.Config.CallTimeout).
// policyLoadWait is how long a commit policy's run waits for the plugin
// to load after a start.
const (
	policyLoadWait = 10 * time.Second
	minFilterWait  = time.Second
)

// filter runs the plugin on v, or fails as it did earlier in the poll.
func (f *Filter) filter(ctx context.Context, v *plugins.View) (plugins.Bitmap, error) {
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
	case !IsPluginError(err) && ctx.Err() == nil && fctx.Err() != nil:
		// The call's wait ran out before the plugin could answer: it
		// waited for a worker or an instance (plugins.ErrBusy), or the
		// host abandoned it before its deadline. Not the plugin's doing.
		err = fmt.Errorf("%w: filter %q could not run within %v: %w", ErrBusy, f.name, f.wait, err)
	}
	return plugins.Bitmap{}, err
}

// IsPluginError reports whether err is one of the plugin host's verdicts.
func IsPluginError(err error) bool {
	for _, s := range [...]error{plugins.ErrTimeout, plugins.ErrTrap, plugins.ErrMemoryLimit, plugins.ErrInvalidAnswer, plugins.ErrPluginFailed,
		plugins.ErrQuarantined, plugins.ErrMemoryBudget, plugins.ErrUnknownPlugin, plugins.ErrWrongKind,
		plugins.ErrBadParams, plugins.ErrInputTooLarge, plugins.ErrClosed} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// Transform returns the PollRequest.Transform of one partition: it runs
// the filter on the immutable read result, off the owner, and replaces
// the stored batches by the node-built batches of the kept records. The
// position is unchanged: the completion still moves the consumer to
// res.Next, past the records the filter dropped.
func (f *Filter) Transform(topic string, partition uint32, maxBatchBytes int) func(context.Context, uint64, owner.ReadResult) (owner.ReadResult, error) {
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

// RunPolicy runs the commit policy pol on what a poll delivered, and
// turns its proposal into a commit carrying the poll's token: the owner
// applies it only if the token is still current, so a proposal from a
// poll that went stale (a purge, a new session, a member fenced or its
// partition moved) is dropped. A policy's failure does not fail the poll,
// whose records the completion already delivered: it is logged (and
// counted in the plugin's stats) and nothing is committed.
func (reg *Registry) RunPolicy(ctx context.Context, o *owner.Owner, c owner.Consumer, pol policyRecord, topic string, partition uint32, res owner.PollResult) {
	who := c.Name
	if c.Member != "" {
		who = c.Name + "/" + c.Member
	}
	// Just after a start the policy may still be loading: its proposal
	// waits for it, a while.
	if err := reg.AwaitLoaded(ctx, pol.Plugin, policyLoadWait); err != nil {
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
	if hook := reg.BeforePolicyCommit.Load(); hook != nil {
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
