package sdk

import "context"

// followGroupPolicy sets the delivery of a consumer created without
// WithDelivery: CommitByPolicy when the group has a commit policy,
// AtLeastOnce otherwise. A policy on a group governs the group's commits
// unless a consumer says otherwise, so a member must not commit past it
// by default.
func (c *Client) followGroupPolicy(ctx context.Context, group string, cfg *groupConfig) error {
	if cfg.deliverySet || group == "" {
		return nil
	}
	d, err := c.DescribeGroup(ctx, group)
	if err != nil {
		return err
	}
	if d.Policy != "" {
		cfg.delivery, cfg.policy = CommitByPolicy, d.Policy
	}
	return nil
}

// Delivery returns the consumer's delivery mode: the one WithDelivery
// gave, or the one it follows from its group (see WithDelivery).
func (g *GroupConsumer) Delivery() Delivery { return g.cfg.delivery }

// GroupPolicy returns the name of the group's commit policy that decides
// this consumer's commits because it was created without WithDelivery
// while the group had one; "" otherwise.
func (g *GroupConsumer) GroupPolicy() string { return g.cfg.policy }
