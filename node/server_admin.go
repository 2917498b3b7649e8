package node

import (
	"context"
	"fmt"

	"github.com/ledgemq/ledge/node/tokens"
	"github.com/ledgemq/ledge/transport/wire"
)

// Handlers of topic administration, partition state and tokens.

func (r *call) createTopic(ctx context.Context, m *wire.CreateTopicRequest) (*wire.CreateTopicReply, error) {
	if err := r.allow(m.Name, wire.ScopeAdmin); err != nil {
		return nil, err
	}
	info, err := r.n.CreateTopic(ctx, m.Name, m.Config)
	if err != nil {
		return nil, err
	}
	return &wire.CreateTopicReply{Topic: info}, nil
}

func (r *call) deleteTopic(ctx context.Context, m *wire.DeleteTopicRequest) (*wire.DeleteTopicReply, error) {
	if err := r.allow(m.Name, wire.ScopeAdmin); err != nil {
		return nil, err
	}
	if err := r.n.DeleteTopic(ctx, m.Name, m.TopicID); err != nil {
		return nil, err
	}
	return &wire.DeleteTopicReply{}, nil
}

func (r *call) listTopics(_ context.Context, _ *wire.ListTopicsRequest) (*wire.ListTopicsReply, error) {
	rep := &wire.ListTopicsReply{}
	for _, t := range r.n.topicList() {
		if r.tok.Sees(t.name) {
			rep.Topics = append(rep.Topics, t.info())
		}
	}
	return rep, nil
}

// visible returns the topic if the token may see it.
func (r *call) visible(name string, id [16]byte) (*topic, error) {
	if !r.tok.Sees(name) {
		return nil, fmt.Errorf("%w: token %s is restricted to topic %q", ErrForbidden, r.tok.Info.ID, r.tok.Info.Topic)
	}
	return r.n.lookup(name, id)
}

func (r *call) describeTopic(_ context.Context, m *wire.DescribeTopicRequest) (*wire.DescribeTopicReply, error) {
	t, err := r.visible(m.Name, [16]byte{})
	if err != nil {
		return nil, err
	}
	rep := &wire.DescribeTopicReply{Topic: t.info(), Partitions: make([]wire.PartitionState, len(t.owners))}
	for i, o := range t.owners {
		ps := t.state(uint32(i))
		if m.WithSkipped && ps.Status == wire.StatusOK && ps.HighWatermark > ps.StartOffset {
			ps.Skipped = o.Skipped(ps.StartOffset, ps.HighWatermark)
		}
		rep.Partitions[i] = ps
	}
	return rep, nil
}

func (r *call) partitionState(_ context.Context, m *wire.GetPartitionStateRequest) (*wire.GetPartitionStateReply, error) {
	t, err := r.visible(m.Topic, [16]byte{})
	if err != nil {
		return nil, err
	}
	rep := &wire.GetPartitionStateReply{TopicID: t.id}
	for _, p := range partitionsOf(t, m.Partitions) {
		rep.Partitions = append(rep.Partitions, t.state(p))
	}
	return rep, nil
}

// partitionsOf returns ps, or every partition of t when ps is empty.
func partitionsOf(t *topic, ps []uint32) []uint32 {
	if len(ps) > 0 {
		return ps
	}
	all := make([]uint32, len(t.owners))
	for i := range all {
		all[i] = uint32(i)
	}
	return all
}

// purge purges partitions one by one; each answers on its own.
func (r *call) purge(ctx context.Context, m *wire.PurgeRequest) (*wire.PurgeReply, error) {
	if err := r.allow(m.Topic, wire.ScopeAdmin); err != nil {
		return nil, err
	}
	t, err := r.n.lookup(m.Topic, m.TopicID)
	if err != nil {
		return nil, err
	}
	rep := &wire.PurgeReply{}
	for _, p := range partitionsOf(t, m.Partitions) {
		o, err := t.owner(p)
		if err == nil {
			_, err = o.Purge(ctx)
		}
		if err != nil {
			s, msg := StatusOf(r.n.topicError(t, err))
			rep.Partitions = append(rep.Partitions, wire.PartitionState{Partition: p, Status: s, Message: msg})
			continue
		}
		r.n.log.Info("partition purged", "topic", t.name, "partition", p)
		rep.Partitions = append(rep.Partitions, t.state(p))
	}
	return rep, nil
}

// topicError says ErrTopicDeleted for a failure on a topic deleted
// meanwhile: whatever the storage said, that is the reason.
func (n *Node) topicError(t *topic, err error) error {
	if t.deleted() {
		return fmt.Errorf("%w: %q", ErrTopicDeleted, t.name)
	}
	return err
}

// createToken mints a token. A token restricted to a topic may only mint
// tokens for that topic, with scopes it has itself.
func (r *call) createToken(ctx context.Context, m *wire.CreateTokenRequest) (*wire.CreateTokenReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	if r.tok.Info.Topic != wire.AllTopics {
		if m.Topic != r.tok.Info.Topic || !r.tok.Info.Scopes.Has(m.Scopes) {
			return nil, fmt.Errorf("%w: token %s may only create tokens for topic %q with scopes within %s",
				ErrForbidden, r.tok.Info.ID, r.tok.Info.Topic, r.tok.Info.Scopes)
		}
	}
	rec, secret, err := r.n.tokens.Create(ctx, m.Label, m.Topic, m.Scopes, m.ExpiresAt)
	if err != nil {
		return nil, err
	}
	r.n.log.Info("token created", "id", rec.Info.ID, "label", rec.Info.Label, "topic", rec.Info.Topic, "scopes", rec.Info.Scopes.String(), "by", r.tok.Info.ID)
	return &wire.CreateTokenReply{Token: rec.Info, Secret: secret}, nil
}

func (r *call) listTokens(_ context.Context, _ *wire.ListTokensRequest) (*wire.ListTokensReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	return &wire.ListTokensReply{Tokens: r.n.tokens.List(func(t *tokens.Token) bool {
		return r.tok.Info.Topic == wire.AllTopics || t.Info.Topic == r.tok.Info.Topic
	})}, nil
}

// revokeToken revokes a token once the revocation is durable and closes
// the connections authenticated with it.
func (r *call) revokeToken(ctx context.Context, m *wire.RevokeTokenRequest) (*wire.RevokeTokenReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	if r.tok.Info.Topic != wire.AllTopics {
		if t := r.n.tokens.Get(m.ID); t != nil && t.Info.Topic != r.tok.Info.Topic {
			return nil, fmt.Errorf("%w: token %s may only revoke tokens of topic %q", ErrForbidden, r.tok.Info.ID, r.tok.Info.Topic)
		}
	}
	rec, err := r.n.tokens.Revoke(ctx, m.ID)
	if err != nil {
		return nil, err
	}
	closed := r.n.ln.CloseToken(rec.Info.ID, "token revoked") + r.n.closeKafkaToken(rec)
	r.n.log.Info("token revoked", "id", rec.Info.ID, "connections closed", closed, "by", r.tok.Info.ID)
	return &wire.RevokeTokenReply{}, nil
}
