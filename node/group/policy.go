package group

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// PolicyRecord is a commit policy attached to a named consumer or kept in
// a group's record; an empty Plugin detaches it. It is stored as JSON.
type PolicyRecord struct {
	V      int               `json:"v"`
	Plugin string            `json:"plugin"`
	Params map[string]string `json:"params,omitempty"`
}

// RecordVersion is the version of the stored policy records (and of the
// plugin registry's records beside them).
const RecordVersion = 1

// A group's commit policy and the deletion of a group.
//
// A commit policy attached to a group is kept in the group's record (see
// store.go), so it survives a restart with the group. Every poll of
// a member of the group runs it on what the poll delivered, and its
// proposal becomes a commit carrying that poll's token, which the
// partition's owner applies only if the token is still current — the
// member still holds the partition under the same assignment, in the same
// history (Node.applyPolicy).
//
// Deleting a group removes its committed offsets on every partition, each
// as a step of the partition's owner, then replaces its record by a
// tombstone that keeps only its epoch ceiling. A group with members is not
// deleted.

// ErrGroupNotEmpty: a group with members cannot be deleted. Not
// retryable as such: stop its members (they leave) or wait for their
// sessions to expire, then delete again. It is an invalid argument
// (errors.Is(err, errInvalidArgument)).
var ErrGroupNotEmpty = fmt.Errorf("%w: the group has members", errInvalidArgument)

// ErrUnknownGroup: the request names a group the node does not have. It
// is an invalid argument (errors.Is(err, errInvalidArgument)); not
// retryable.
var ErrUnknownGroup = fmt.Errorf("%w: unknown group", errInvalidArgument)

// consumerDeleter is a partition owner that deletes a group's progress
// (its bookmark and state) in one batch, as an owner step: *Owner's
// DeleteConsumer. Assigners that wrap an owner forward it.
type consumerDeleter interface {
	DeleteConsumer(ctx context.Context, name string) (owner.Durable, error)
}

// errNoConsumerDeletion: a partition's assigner is not an owner that can
// delete a group's progress (a wrapper that does not forward it).
var errNoConsumerDeletion = errors.New("group: the partition's owner cannot delete a group's offsets")

func checkGroupName(name string) error {
	if name == "" || len(name) > wire.MaxNameLen {
		return invalidArgument(fmt.Sprintf("group name %q: want 1 to %d bytes", name, wire.MaxNameLen))
	}
	return nil
}

// SetPolicy attaches the commit policy pol to the group called name, or
// detaches it when pol.Plugin is empty. A group that does not exist yet
// is created (empty), so that a policy can be set before the first member
// joins. The policy is durable when SetPolicy returns; polls see it from
// then on.
func (gs *Groups) SetPolicy(ctx context.Context, name string, pol PolicyRecord) error {
	if err := checkGroupName(name); err != nil {
		return err
	}
	if pol.Plugin == "" {
		pol = PolicyRecord{}
	} else {
		pol.V = RecordVersion
		pol.Params = maps.Clone(pol.Params)
	}
	gs.mu.Lock()
	g := gs.groups[name]
	if g == nil {
		if pol.Plugin == "" {
			gs.mu.Unlock()
			return nil // nothing to detach
		}
		g = gs.createLocked(name)
	}
	g.policy = pol
	t, err := putGroupRecord(gs.cfg.Meta, name, g.record(g.reserved))
	gs.viewMu.Lock()
	if pol.Plugin == "" {
		delete(gs.policies, name)
	} else {
		gs.policies[name] = pol
	}
	gs.viewMu.Unlock()
	gs.mu.Unlock()
	if err == nil {
		err = gs.cfg.Meta.Sync(ctx, t)
	}
	if err != nil {
		return fmt.Errorf("group: storing the commit policy of group %q: %w", name, err)
	}
	gs.mu.Lock()
	if gs.groups[name] == g {
		g.unborn = false
	}
	gs.mu.Unlock()
	gs.cfg.Logger.Info("group commit policy set", "group", name, "plugin", pol.Plugin)
	return nil
}

// Policy returns the commit policy attached to the group called name.
func (gs *Groups) Policy(name string) (PolicyRecord, bool) {
	if gs == nil {
		return PolicyRecord{}, false
	}
	gs.viewMu.RLock()
	p, ok := gs.policies[name]
	gs.viewMu.RUnlock()
	return p, ok
}

// Delete deletes the group called name: its committed offsets on every
// partition of every topic (each an owner step; see GroupTopicLister),
// its policy, and its record. A group with members is refused with ErrGroupNotEmpty, an
// unknown one with ErrUnknownGroup. The deletion is durable when Delete
// returns; if it fails part way, the group is still there and Delete may
// be called again.
//
// The offsets' deletions are ordered before the tombstone of the record
// in the metadata store, so a crash never leaves a deleted group's
// offsets behind for a group created again under its name.
func (gs *Groups) Delete(ctx context.Context, name string) error {
	if err := checkGroupName(name); err != nil {
		return err
	}
	gs.mu.Lock()
	g := gs.groups[name]
	switch {
	case g == nil:
		gs.mu.Unlock()
		return fmt.Errorf("%w %q", ErrUnknownGroup, name)
	case len(g.members) > 0:
		n := len(g.members)
		gs.mu.Unlock()
		return fmt.Errorf("%w: group %q has %d member(s); stop its consumers (or let their sessions expire) and delete again", ErrGroupNotEmpty, name, n)
	}
	var waits []owner.Durable
	topics := g.subscription()
	if l, ok := gs.cfg.Topics.(GroupTopicLister); ok {
		topics = l.GroupTopicNames()
	}
	for _, topic := range topics {
		_, parts, ok := gs.cfg.Topics.GroupTopic(topic)
		if !ok {
			continue
		}
		for i, p := range parts {
			d, err := deleteGroupOffset(ctx, p, name)
			if errors.Is(err, errTopicDeleted) {
				continue // its offsets went with it
			}
			if err != nil {
				gs.mu.Unlock()
				return fmt.Errorf("group: deleting group %q's offset on %s/%d: %w", name, topic, i, err)
			}
			waits = append(waits, d)
		}
	}
	t, err := putGroupRecord(gs.cfg.Meta, name, groupRecord{deleted: true, reserved: max(g.reserved, g.epoch)})
	if err == nil {
		delete(gs.groups, name)
		gs.tombs[name] = max(g.reserved, g.epoch)
		gs.viewMu.Lock()
		delete(gs.policies, name)
		gs.viewMu.Unlock()
	}
	gs.mu.Unlock()
	if err != nil {
		return fmt.Errorf("group: deleting group %q: %w", name, err)
	}
	for _, d := range waits {
		if err := d.Wait(ctx); err != nil {
			return fmt.Errorf("group: deleting group %q's offsets: %w", name, err)
		}
	}
	if err := gs.cfg.Meta.Sync(ctx, t); err != nil {
		return fmt.Errorf("group: deleting group %q: %w", name, err)
	}
	gs.cfg.Logger.Info("group deleted", "group", name)
	return nil
}

// deleteGroupOffset deletes a group's committed offset on one partition,
// as a step of the partition's owner.
func deleteGroupOffset(ctx context.Context, p PartitionAssigner, group string) (owner.Durable, error) {
	d, ok := p.(consumerDeleter)
	if !ok {
		return owner.Durable{}, errNoConsumerDeletion
	}
	return d.DeleteConsumer(ctx, group)
}

// policyToWire is a stored policy as the wire carries it, keys sorted.
func policyToWire(p PolicyRecord) wire.Filter {
	f := wire.Filter{Name: p.Plugin}
	for _, k := range sortedKeys(p.Params) {
		f.Params = append(f.Params, wire.FilterParam{Key: k, Value: p.Params[k]})
	}
	return f
}
