package session

import (
	"context"
	"fmt"

	"github.com/ledgemq/ledge/node/tokens"
	"github.com/ledgemq/ledge/transport/wire"
)

// Handlers of topic administration, partition state and tokens.

func (r *Call) CreateTopic(ctx context.Context, m *wire.CreateTopicRequest) (*wire.CreateTopicReply, error) {
	if err := r.allow(m.Name, wire.ScopeAdmin); err != nil {
		return nil, err
	}
	info, err := r.s.n.CreateTopic(ctx, m.Name, m.Config)
	if err != nil {
		return nil, err
	}
	return &wire.CreateTopicReply{Topic: info}, nil
}

func (r *Call) DeleteTopic(ctx context.Context, m *wire.DeleteTopicRequest) (*wire.DeleteTopicReply, error) {
	if err := r.allow(m.Name, wire.ScopeAdmin); err != nil {
		return nil, err
	}
	if err := r.s.n.DeleteTopic(ctx, m.Name, m.TopicID); err != nil {
		return nil, err
	}
	return &wire.DeleteTopicReply{}, nil
}

func (r *Call) ListTopics(_ context.Context, _ *wire.ListTopicsRequest) (*wire.ListTopicsReply, error) {
	rep := &wire.ListTopicsReply{}
	for _, t := range r.s.n.Topics() {
		if r.s.tok.Sees(t.Name) {
			rep.Topics = append(rep.Topics, t.Info())
		}
	}
	return rep, nil
}

// visible returns the topic if the token may see it.
func (r *Call) visible(name string, id [16]byte) (*Topic, error) {
	if !r.s.tok.Sees(name) {
		return nil, fmt.Errorf("%w: token %s is restricted to topic %q", ErrForbidden, r.s.tok.Info.ID, r.s.tok.Info.Topic)
	}
	return r.s.n.Lookup(name, id)
}

func (r *Call) DescribeTopic(_ context.Context, m *wire.DescribeTopicRequest) (*wire.DescribeTopicReply, error) {
	t, err := r.visible(m.Name, [16]byte{})
	if err != nil {
		return nil, err
	}
	rep := &wire.DescribeTopicReply{Topic: t.Info(), Partitions: make([]wire.PartitionState, len(t.Owners))}
	for i, o := range t.Owners {
		ps := t.State(uint32(i))
		if m.WithSkipped && ps.Status == wire.StatusOK && ps.HighWatermark > ps.StartOffset {
			ps.Skipped = o.Skipped(ps.StartOffset, ps.HighWatermark)
		}
		rep.Partitions[i] = ps
	}
	return rep, nil
}

func (r *Call) PartitionState(_ context.Context, m *wire.GetPartitionStateRequest) (*wire.GetPartitionStateReply, error) {
	t, err := r.visible(m.Topic, [16]byte{})
	if err != nil {
		return nil, err
	}
	rep := &wire.GetPartitionStateReply{TopicID: t.ID}
	for _, p := range partitionsOf(t, m.Partitions) {
		rep.Partitions = append(rep.Partitions, t.State(p))
	}
	return rep, nil
}

// partitionsOf returns ps, or every partition of t when ps is empty.
func partitionsOf(t *Topic, ps []uint32) []uint32 {
	if len(ps) > 0 {
		return ps
	}
	all := make([]uint32, len(t.Owners))
	for i := range all {
		all[i] = uint32(i)
	}
	return all
}

// Purge purges partitions one by one; each answers on its own.
func (r *Call) Purge(ctx context.Context, m *wire.PurgeRequest) (*wire.PurgeReply, error) {
	if err := r.allow(m.Topic, wire.ScopeAdmin); err != nil {
		return nil, err
	}
	t, err := r.s.n.Lookup(m.Topic, m.TopicID)
	if err != nil {
		return nil, err
	}
	rep := &wire.PurgeReply{}
	for _, p := range partitionsOf(t, m.Partitions) {
		o, err := t.Owner(p)
		if err == nil {
			_, err = o.Purge(ctx)
		}
		if err != nil {
			s, msg := StatusOf(topicError(t, err))
			rep.Partitions = append(rep.Partitions, wire.PartitionState{Partition: p, Status: s, Message: msg})
			continue
		}
		r.s.n.Logger().Info("partition purged", "topic", t.Name, "partition", p)
		rep.Partitions = append(rep.Partitions, t.State(p))
	}
	return rep, nil
}

// topicError says ErrTopicDeleted for a failure on a topic deleted
// meanwhile: whatever the storage said, that is the reason.
func topicError(t *Topic, err error) error {
	if t.Deleted() {
		return fmt.Errorf("%w: %q", ErrTopicDeleted, t.Name)
	}
	return err
}

// CreateToken mints a token. A token restricted to a topic may only mint
// tokens for that topic, with scopes it has itself.
func (r *Call) CreateToken(ctx context.Context, m *wire.CreateTokenRequest) (*wire.CreateTokenReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	if r.s.tok.Info.Topic != wire.AllTopics {
		if m.Topic != r.s.tok.Info.Topic || !r.s.tok.Info.Scopes.Has(m.Scopes) {
			return nil, fmt.Errorf("%w: token %s may only create tokens for topic %q with scopes within %s",
				ErrForbidden, r.s.tok.Info.ID, r.s.tok.Info.Topic, r.s.tok.Info.Scopes)
		}
	}
	rec, secret, err := r.s.n.Tokens().Create(ctx, m.Label, m.Topic, m.Scopes, m.ExpiresAt)
	if err != nil {
		return nil, err
	}
	r.s.n.Logger().Info("token created", "id", rec.Info.ID, "label", rec.Info.Label, "topic", rec.Info.Topic, "scopes", rec.Info.Scopes.String(), "by", r.s.tok.Info.ID)
	return &wire.CreateTokenReply{Token: rec.Info, Secret: secret}, nil
}

func (r *Call) ListTokens(_ context.Context, _ *wire.ListTokensRequest) (*wire.ListTokensReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	return &wire.ListTokensReply{Tokens: r.s.n.Tokens().List(func(t *tokens.Token) bool {
		return r.s.tok.Info.Topic == wire.AllTopics || t.Info.Topic == r.s.tok.Info.Topic
	})}, nil
}

// RevokeToken revokes a token once the revocation is durable and closes
// the connections authenticated with it.
func (r *Call) RevokeToken(ctx context.Context, m *wire.RevokeTokenRequest) (*wire.RevokeTokenReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	if r.s.tok.Info.Topic != wire.AllTopics {
		if t := r.s.n.Tokens().Get(m.ID); t != nil && t.Info.Topic != r.s.tok.Info.Topic {
			return nil, fmt.Errorf("%w: token %s may only revoke tokens of topic %q", ErrForbidden, r.s.tok.Info.ID, r.s.tok.Info.Topic)
		}
	}
	rec, err := r.s.n.Tokens().Revoke(ctx, m.ID)
	if err != nil {
		return nil, err
	}
	closed := r.s.n.CloseToken(rec)
	r.s.n.Logger().Info("token revoked", "id", rec.Info.ID, "connections closed", closed, "by", r.s.tok.Info.ID)
	return &wire.RevokeTokenReply{}, nil
}
