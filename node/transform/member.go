package transform

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/transport/wire"
)

// Groups is the node's group coordinator as a transform's member uses it
// (*group.Groups).
type Groups interface {
	Join(ctx context.Context, req group.JoinRequest) (wire.MemberAssignment, error)
	Heartbeat(ctx context.Context, req group.HeartbeatRequest) (wire.MemberAssignment, error)
	Leave(ctx context.Context, groupName, memberID string, epoch fence.MemberEpoch) error
	Delete(ctx context.Context, name string) error
}

// running is a transform the manager runs: one group member, and a
// partition runner for each input partition it holds.
type running struct {
	spec   Spec
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	err   string
	stats map[uint32]*partStats
	parts map[uint32]*heldPart
}

// heldPart is a partition the member holds and its runner.
type heldPart struct {
	epoch  uint64
	cancel context.CancelFunc
	done   chan struct{}
}

func (rt *running) setErr(err error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if err == nil {
		rt.err = ""
		return
	}
	rt.err = err.Error()
}

func (rt *running) info() Info {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	info := Info{Spec: rt.spec, Error: rt.err}
	for p := uint32(0); int(p) < len(rt.stats); p++ {
		if s := rt.stats[p]; s != nil {
			info.Partitions = append(info.Partitions, s.status())
		}
	}
	return info
}

// runMember keeps the transform's member in its group until ctx ends:
// join, hold what is assigned, heartbeat; join again after a failure.
func (m *Manager) runMember(ctx context.Context, rt *running) {
	defer close(rt.done)
	failures := 0
	for ctx.Err() == nil {
		err := m.memberSession(ctx, rt)
		if ctx.Err() != nil {
			return
		}
		failures++
		rt.setErr(err)
		m.log.Warn("transform: member failed; joining again", "transform", rt.spec.Name, "err", err)
		t := time.NewTimer(m.backoff(failures))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// memberSession is one incarnation of the member: it ends with an error,
// or when ctx ends, having stopped its runners and left the group.
func (m *Manager) memberSession(ctx context.Context, rt *running) error {
	spec := rt.spec
	in, err := m.topic(spec.From, spec.FromID)
	if err != nil {
		return err
	}
	out, err := m.topic(spec.To, spec.ToID)
	if err != nil {
		return err
	}
	params, err := plugins.ParseParams(paramList(spec.Params))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	asg, err := m.cfg.Groups.Join(ctx, group.JoinRequest{Group: spec.Group(), Member: spec.Name,
		Topics: []string{spec.From}, ClientID: "ledge-transform"})
	if err != nil {
		return fmt.Errorf("transform: join group %q: %w", spec.Group(), err)
	}
	defer func() {
		rt.hold(nil, nil, nil, nil, Topic{})
		_ = m.cfg.Groups.Leave(context.WithoutCancel(ctx), spec.Group(), asg.MemberID, fence.MemberEpoch(asg.MemberEpoch))
	}()
	rt.setErr(nil)
	for {
		rt.hold(&asg, func(p uint32, epoch uint64) *partRunner {
			return &partRunner{
				spec: spec, params: params, part: p, in: in.Partitions[p],
				dst: p % uint32(len(out.Partitions)), out: out.Partitions[p%uint32(len(out.Partitions))],
				maxBatch: out.MaxBatchBytes, plugin: m.cfg.Plugin, producers: m.cfg.Producers,
				consumer: owner.Consumer{Name: spec.Group(), Member: asg.MemberID, MemberEpoch: fence.MemberEpoch(epoch)},
			}
		}, m.backoff, m.now, in)
		t := time.NewTimer(asg.HeartbeatInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		// A topic deleted or re-created since stops the transform, with
		// the reason in its status.
		if _, err := m.topic(spec.From, spec.FromID); err != nil {
			return err
		}
		if _, err := m.topic(spec.To, spec.ToID); err != nil {
			return err
		}
		next, err := m.cfg.Groups.Heartbeat(ctx, group.HeartbeatRequest{Group: spec.Group(), Member: asg.MemberID,
			Epoch: fence.MemberEpoch(asg.MemberEpoch), Owned: rt.owned(spec.From)})
		if err != nil {
			return fmt.Errorf("transform: heartbeat: %w", err)
		}
		asg = next
	}
}

// hold makes the partitions held match asg: a runner for each partition
// of the input topic assigned (a new one when its assignment epoch
// changed), none for the others. A nil asg stops every runner.
func (rt *running) hold(asg *wire.MemberAssignment, newRunner func(p uint32, epoch uint64) *partRunner,
	backoff func(int) time.Duration, now func() time.Time, in Topic) {
	want := map[uint32]uint64{}
	if asg != nil {
		for _, a := range asg.Assignment {
			if a.Topic == rt.spec.From && fence.TopicID(a.TopicID) == rt.spec.FromID && int(a.Partition) < len(in.Partitions) {
				want[a.Partition] = a.AssignmentEpoch
			}
		}
	}
	rt.mu.Lock()
	var stop []*heldPart
	for p, h := range rt.parts {
		if e, ok := want[p]; !ok || e != h.epoch {
			stop = append(stop, h)
			delete(rt.parts, p)
			if s := rt.stats[p]; s != nil {
				s.setRunning(false)
			}
		}
	}
	rt.mu.Unlock()
	for _, h := range stop {
		h.cancel()
		<-h.done
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for p, epoch := range want {
		if rt.parts[p] != nil {
			continue
		}
		s := rt.stats[p]
		if s == nil {
			s = &partStats{now: now, in: in.Partitions[p]}
			s.st.Partition = p
			rt.stats[p] = s
		}
		s.setRunning(true)
		r := newRunner(p, epoch)
		r.stats = s
		ctx, cancel := context.WithCancel(context.Background())
		h := &heldPart{epoch: epoch, cancel: cancel, done: make(chan struct{})}
		rt.parts[p] = h
		go func() {
			defer close(h.done)
			r.run(ctx, backoff)
		}()
	}
}

// owned lists the partitions the member holds, for its heartbeat.
func (rt *running) owned(topic string) []wire.TopicPartition {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make([]wire.TopicPartition, 0, len(rt.parts))
	for p := range rt.parts {
		out = append(out, wire.TopicPartition{Topic: topic, Partition: p})
	}
	return out
}
