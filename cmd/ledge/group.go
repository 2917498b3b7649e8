package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/sdk"
	"github.com/spf13/cobra"
)

func newGroupCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe and administer consumer groups",
		Long: `Inspect the consumer groups of a node: their members, the partitions each
holds with its assignment epoch, the group's commit policy, and its
committed offsets and lag. Attach a commit policy plugin to a group, or
delete a group that has no members.

Consume as a member of a group with: ledge consume TOPIC --group GROUP.`,
		Example: `  ledge group list
  ledge group describe billing
  ledge group describe billing --json
  ledge group set-policy billing checkpoint --param header=checkpoint
  ledge group delete billing`,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newGroupListCommand(cf), newGroupDescribeCommand(cf), newGroupSetPolicyCommand(cf),
		newGroupDeleteCommand(cf))
	return cmd
}

type groupJSON struct {
	Name     string   `json:"name"`
	State    string   `json:"state"`
	Assignor string   `json:"assignor"`
	Epoch    uint64   `json:"epoch"`
	Members  int      `json:"members"`
	Topics   []string `json:"topics"`
}

func groupToJSON(g sdk.GroupSummary) groupJSON {
	return groupJSON{Name: g.Name, State: g.State.String(), Assignor: g.Assignor.String(), Epoch: g.Epoch,
		Members: g.Members, Topics: g.Topics}
}

func newGroupListCommand(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the consumer groups",
		Example: "  ledge group list\n  ledge group list --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				groups, err := c.ListGroups(ctx)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if asJSON {
					out := make([]groupJSON, len(groups))
					for i, g := range groups {
						out[i] = groupToJSON(g)
					}
					return writeJSON(w, out)
				}
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "GROUP\tSTATE\tMEMBERS\tEPOCH\tASSIGNOR\tTOPICS")
				for _, g := range groups {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", g.Name, g.State, g.Members, g.Epoch, g.Assignor, strings.Join(g.Topics, ","))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

type groupMemberJSON struct {
	ID       string               `json:"id"`
	ClientID string               `json:"client_id,omitempty"`
	Host     string               `json:"host,omitempty"`
	Epoch    uint64               `json:"epoch"`
	Topics   []string             `json:"topics"`
	Assigned []groupAssignmentRow `json:"assigned"`
	Revoking []string             `json:"revoking,omitempty"`
	Pending  []string             `json:"pending,omitempty"`
}

type groupAssignmentRow struct {
	Topic           string `json:"topic"`
	Partition       int32  `json:"partition"`
	AssignmentEpoch uint64 `json:"assignment_epoch"`
}

type groupOffsetJSON struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Committed *uint64 `json:"committed"`
	History   uint64  `json:"history,omitempty"`
	Resume    uint64  `json:"resume"`
	Lag       uint64  `json:"lag"`
	Skipped   uint64  `json:"skipped,omitempty"`
	Member    string  `json:"member,omitempty"`
	Error     string  `json:"error,omitempty"`
}

func newGroupDescribeCommand(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's members, assignments with epochs, committed offsets and lag",
		Long: `Show a consumer group: each member with its member epoch and the partitions
it holds, each with the epoch at which the member received it (its
assignment epoch); partitions being revoked or still to be received; and,
per partition of the group's topics, the committed offset with the history
epoch it was committed in, where the group resumes and how far behind the
end of the partition that is, in records: offsets a recovery skipped after
a crash hold none and are left out of LAG (a SKIPPED column shows them).`,
		Example: "  ledge group describe billing\n  ledge group describe billing --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				d, err := c.DescribeGroup(ctx, args[0])
				if err != nil {
					return err
				}
				if err := groupExists(ctx, c, d); err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if asJSON {
					return writeJSON(w, groupDescriptionJSON(d))
				}
				printGroup(w, d)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func tpString(tp sdk.TopicPartition) string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

func tpStrings(tps []sdk.TopicPartition) []string {
	var out []string
	for _, tp := range tps {
		out = append(out, tpString(tp))
	}
	return out
}

func groupDescriptionJSON(d sdk.GroupDescription) any {
	out := struct {
		groupJSON
		Policy       string            `json:"policy,omitempty"`
		PolicyParams map[string]string `json:"policy_params,omitempty"`
		MemberList   []groupMemberJSON `json:"member_list"`
		Offsets      []groupOffsetJSON `json:"offsets"`
	}{groupJSON: groupToJSON(d.GroupSummary), Policy: d.Policy, PolicyParams: d.PolicyParams}
	for _, m := range d.Members {
		mj := groupMemberJSON{ID: m.ID, ClientID: m.ClientID, Host: m.Host, Epoch: m.Epoch, Topics: m.Topics, Revoking: tpStrings(m.Revoking), Pending: tpStrings(m.Pending)}
		for _, a := range m.Assigned {
			mj.Assigned = append(mj.Assigned, groupAssignmentRow{Topic: a.Topic, Partition: a.Partition, AssignmentEpoch: a.AssignmentEpoch})
		}
		out.MemberList = append(out.MemberList, mj)
	}
	for _, o := range d.Offsets {
		oj := groupOffsetJSON{Topic: o.Topic, Partition: o.Partition, Resume: o.Resume, Lag: o.Lag, Skipped: o.Skipped, Member: o.Member}
		if o.Committed {
			off := o.Offset
			oj.Committed, oj.History = &off, o.History
		}
		if o.Err != nil {
			oj.Error = o.Err.Error()
		}
		out.Offsets = append(out.Offsets, oj)
	}
	return out
}

func printGroup(w io.Writer, d sdk.GroupDescription) {
	fmt.Fprintf(w, "group %s: %s, epoch %d, %s assignor, %s\n", d.Name, d.State, d.Epoch, d.Assignor, plural(len(d.Members), "member"))
	if d.Policy != "" {
		fmt.Fprintf(w, "commit policy: %s%s\n", d.Policy, paramsString(d.PolicyParams))
	}
	if len(d.Members) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MEMBER\tCLIENT ID\tHOST\tEPOCH\tPARTITIONS (ASSIGNMENT EPOCH)\tREVOKING\tPENDING")
		for _, m := range d.Members {
			var held []string
			for _, a := range m.Assigned {
				held = append(held, fmt.Sprintf("%s(%d)", tpString(a.TopicPartition), a.AssignmentEpoch))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", shortMemberID(m.ID), orDash(m.ClientID), orDash(m.Host), m.Epoch,
				dashIfEmpty(held), dashIfEmpty(tpStrings(m.Revoking)), dashIfEmpty(tpStrings(m.Pending)))
		}
		_ = tw.Flush()
	}
	if len(d.Offsets) == 0 {
		return
	}
	fmt.Fprintln(w)
	skipped := slices.ContainsFunc(d.Offsets, func(o sdk.GroupOffset) bool { return o.Skipped != 0 })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if skipped {
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tRESUME\tLAG\tSKIPPED\tMEMBER")
	} else {
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tRESUME\tLAG\tMEMBER")
	}
	for _, o := range d.Offsets {
		committed := "-"
		if o.Committed {
			committed = fmt.Sprintf("%d (history %d)", o.Offset, o.History)
		}
		member := o.Member
		if member == "" {
			member = "-"
		}
		member = shortMemberID(member)
		if o.Err != nil {
			fmt.Fprintf(tw, "%s\t%d\t%s\t\t\t\n", o.Topic, o.Partition, o.Err)
			continue
		}
		if skipped {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\n", o.Topic, o.Partition, committed, o.Resume, o.Lag, o.Skipped, member)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\n", o.Topic, o.Partition, committed, o.Resume, o.Lag, member)
	}
	_ = tw.Flush()
	if skipped {
		fmt.Fprintln(w, "\nSKIPPED: offsets a recovery after a crash numbered past; they hold no record and LAG leaves them out.")
	}
}

// paramsString prints plugin parameters as " (k=v, ...)", keys sorted.
func paramsString(params map[string]string) string {
	if len(params) == 0 {
		return ""
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		kv = append(kv, k+"="+params[k])
	}
	return " (" + strings.Join(kv, ", ") + ")"
}

func newGroupSetPolicyCommand(cf *clientFlags) *cobra.Command {
	var (
		params []string
		clear  bool
	)
	cmd := &cobra.Command{
		Use:   "set-policy GROUP [POLICY]",
		Short: "Attach a commit policy plugin to a group (or detach it with --clear)",
		Long: `Attach the commit policy plugin POLICY (see ledge plugin add --kind
commit-policy) to the consumer group GROUP, with its parameters: from then
on every poll of each member runs the policy on what it delivered, and the
node commits what the policy proposes with that poll's fence token. A
proposal from a member that was fenced, or whose partition moved, is
dropped. The policy is kept with the group across node restarts; ledge
group describe shows it. A group that does not exist yet is created,
empty. --clear detaches the group's policy. Needs an admin token.

The policy governs the group's commits: a consumer of the group created
while it is set (ledge consume --group GROUP, or an SDK group consumer
without WithDelivery) commits nothing itself and says so;
--commit-by-policy=false opts a consumer out.`,
		Example: `  ledge group set-policy billing checkpoint
  ledge group set-policy billing checkpoint --param header=checkpoint
  ledge group set-policy billing --clear`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			policy := ""
			if len(args) == 2 {
				policy = args[1]
			}
			switch {
			case clear && (policy != "" || len(params) > 0):
				return errors.New("--clear takes no POLICY and no --param")
			case !clear && policy == "":
				return errors.New("name the commit policy to attach, or --clear to detach the group's")
			}
			pp, err := plugins.ParseParams(params)
			if err != nil {
				return fmt.Errorf("--param: %w", err)
			}
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				if err := c.SetGroupCommitPolicy(ctx, args[0], policy, pp); err != nil {
					return err
				}
				if clear {
					fmt.Fprintf(cmd.OutOrStdout(), "group %s: commit policy detached\n", args[0])
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "group %s: commit policy %s%s\n", args[0], policy, paramsString(pp))
				}
				return nil
			})
		},
	}
	cmd.Flags().StringArrayVar(&params, "param", nil, "a policy parameter key=value (repeatable)")
	cmd.Flags().BoolVar(&clear, "clear", false, "detach the group's commit policy")
	return cmd
}

func newGroupDeleteCommand(cf *clientFlags) *cobra.Command {
	var yes *bool
	cmd := &cobra.Command{
		Use:   "delete GROUP",
		Short: "Delete a consumer group without members, with its committed offsets",
		Long: `Delete the consumer group GROUP: its committed offsets on every partition,
its commit policy and the group itself. A group created later under the
name starts from scratch. A group that still has members is refused:
stop its consumers (or let their sessions expire) and delete again. Needs
an admin token.`,
		Example: "  ledge group delete billing\n  ledge group delete billing --yes",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := confirm(cmd, *yes, fmt.Sprintf("Delete group %s with its committed offsets and commit policy?", args[0])); err != nil {
				return err
			}
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				if err := c.DeleteGroup(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "group %s deleted\n", args[0])
				return nil
			})
		},
	}
	yes = addYesFlag(cmd)
	return cmd
}

func dashIfEmpty(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, " ")
}

// runGroupConsume is `ledge consume TOPIC --group GROUP`: it reads as a
// member of the group, at least once — what it printed is committed with
// the token of the poll that returned it, by the next poll or on exit —
// or with --at-most-once, the node commits what each poll returns before
// the reply leaves; it takes part in rebalances while it runs.
func runGroupConsume(cmd *cobra.Command, cf *clientFlags, topic, group string, f *consumeFlags) error {
	switch {
	case f.format != "raw" && f.format != "json":
		return fmt.Errorf("--format %q: want raw or json", f.format)
	case f.consumer != "" || f.from != "" || len(f.partitions) > 0:
		return errors.New("--group cannot be combined with --consumer, --from or --partition: the group assigns the partitions and resumes from its committed offsets")
	case f.count < 0:
		return errors.New("--count must not be negative")
	case f.filter != "" || f.policy != "" || len(f.params) > 0:
		return errors.New("--filter, --commit-policy and --param do not apply to --group: attach a commit policy to the group with ledge group set-policy")
	}
	delivery, err := groupDelivery(f)
	if err != nil {
		return err
	}
	// Without --follow a poll still waits a little: the member may have to
	// wait for its partitions to be released by others.
	wait := 500 * time.Millisecond
	if f.follow {
		wait = f.maxWait
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := cf.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	stderr := cmd.ErrOrStderr()
	report := func(what string) sdk.PartitionsFunc {
		return func(_ context.Context, tps []sdk.TopicPartition) {
			fmt.Fprintf(stderr, "ledge: group %s: %s %s\n", group, what, strings.Join(tpStrings(tps), " "))
		}
	}
	if k, ok, err := f.keyOption(); err != nil {
		return err
	} else if ok {
		delivery = append(delivery, k)
	}
	g, err := c.NewGroupConsumer(ctx, group, []string{topic}, append(delivery, sdk.WithGroupMaxWait(wait),
		sdk.OnAssigned(report("assigned")), sdk.OnRevoked(report("revoked")), sdk.OnLost(report("lost")))...)
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, deliveryLine(group, g))
	defer g.Close(context.WithoutCancel(ctx))

	out := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
	defer out.Flush()
	printed, idle := 0, 0
	for {
		recs, pollErr := g.Poll(ctx)
		if pollErr != nil && ctx.Err() != nil {
			return nil // interrupted
		}
		if f.count > 0 && printed+len(recs) > f.count && f.atMostOnce {
			// The node committed the whole poll before it answered: what
			// is past --count is not printed, and not read again.
			recs = recs[:f.count-printed]
		} else if f.count > 0 && printed+len(recs) > f.count {
			rest := recs[f.count-printed:]
			recs = recs[:f.count-printed]
			if g.Delivery() != sdk.CommitByPolicy {
				if err := g.Commit(context.WithoutCancel(ctx), recs...); err != nil {
					return fmt.Errorf("commit: %w", err)
				}
			}
			g.Unpoll(rest...)
		}
		for _, r := range recs {
			if err := printRecord(out, f.format, r); err != nil {
				return err
			}
		}
		printed += len(recs)
		if err := out.Flush(); err != nil {
			return err
		}
		// Without --follow, stop once a poll of held partitions found
		// nothing (the first polls may come before the assignment).
		if len(recs) == 0 && len(g.Assignment()) > 0 {
			idle++
		}
		switch {
		case pollErr != nil && f.follow && sdk.IsRetryable(pollErr):
			fmt.Fprintf(stderr, "ledge: %s; retrying\n", explain(pollErr))
		case pollErr != nil && !errors.Is(pollErr, fence.ErrUnassignedPartition) && !errors.Is(pollErr, fence.ErrStaleMemberEpoch):
			return pollErr
		case f.count > 0 && printed >= f.count:
			return nil
		case !f.follow && idle > 0:
			return nil
		}
	}
}

// shortMemberID is the start of a member id, enough to tell a group's
// members apart in the tables; --json gives it whole.
func shortMemberID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
