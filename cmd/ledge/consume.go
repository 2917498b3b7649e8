package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/ledgemq/ledge/sdk"
	"github.com/spf13/cobra"
)

type consumeFlags struct {
	from       string
	follow     bool
	count      int
	commit     bool
	consumer   string
	group      string
	atMostOnce bool
	byPolicy   bool
	policySet  bool // --commit-by-policy was given, true or false
	format     string
	partitions []int
	maxWait    time.Duration
	filter     string
	params     []string
	policy     string
	reset      string
	key        string
	keyPrefix  string
}

func newConsumeCommand() *cobra.Command {
	var f consumeFlags
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print a topic's records",
		Long: `Print the records of a topic's partitions, one per line, until it has shown
what is there (or --count records); with --follow, keep waiting for new
ones until interrupted.

--from says where to start: earliest (the first record), latest (only
records produced from now on), committed (a named consumer's committed
position), an offset (42), a time (2026-01-02T15:04:05Z) or a time ago
(-90m). Default: committed with --consumer, earliest without. An offset
below a partition's start is an error unless --reset earliest or latest
says where to go; an offset past the end is an error, or with --follow,
where printing starts once the partition reaches it.

--consumer NAME reads as a named consumer: attaching fences any other
process consuming under the name. With --commit it commits what it
printed, with the fence token of the poll that returned it.

--group NAME reads as a member of a consumer group, which shares the
topic's partitions among its members. When the group has a commit policy
(ledge group set-policy), the policy decides the group's commits and this
consumer commits nothing itself; --commit-by-policy=false opts out.
Otherwise delivery is at least once (what was printed is committed by the
next poll or on exit); with --at-most-once the node commits what each
poll returns before the reply leaves, so nothing is printed twice, and
what a crash interrupts is skipped. One line on stderr says which applies.

--filter NAME runs a filter plugin on the node: only the records it keeps
are sent (the position still moves past the others). --commit-policy NAME
attaches a commit policy plugin to --consumer. --param k=v gives either its
parameters.

--key K prints only the records whose key is K (--key-prefix P: whose
key starts with P): the commands of one device on a topic all devices
share. The node parks a --follow poll by its key and answers it only for
a record of that key; the position still moves past the other keys'
records, so --commit commits them too.

--format raw prints each value; json prints one object per record with
its topic, partition, offset, timestamp, key, value and headers (key and
value as strings when they are UTF-8, else key_base64 and value_base64).`,
		Example: `  ledge consume demo
  ledge consume orders --from latest --follow
  ledge consume orders --consumer billing --commit --count 100 --format json
  ledge consume sensors --from -1h --partition 0
  ledge consume readings --filter site --param field=site --param equals=lyon
  ledge consume commands --key device-0042 --consumer device-0042 --commit --follow
  ledge consume frames --consumer decoder --commit-policy checkpoint
  ledge consume orders --group billing --follow
  ledge consume orders --group audit --at-most-once --count 10`,
		Args: cobra.ExactArgs(1),
	}
	cf := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return runConsume(cmd, cf, args[0], &f) }
	fs := cmd.Flags()
	fs.StringVar(&f.from, "from", "", "where to start: earliest, latest, committed, OFFSET, TIME (RFC 3339) or -DURATION")
	fs.StringVar(&f.reset, "reset", "", "where to go when a position is outside a partition's records: earliest or latest (default: fail)")
	fs.BoolVarP(&f.follow, "follow", "F", false, "keep waiting for new records")
	fs.IntVarP(&f.count, "count", "n", 0, "stop after this many records (0: no limit)")
	fs.BoolVar(&f.commit, "commit", false, "commit what was printed (needs --consumer)")
	fs.StringVar(&f.consumer, "consumer", "", "consume as this named consumer")
	fs.StringVar(&f.group, "group", "", "consume as a member of this consumer group (its commit policy decides the commits if it has one; else at least once, or --at-most-once; see ledge group)")
	fs.BoolVar(&f.byPolicy, "commit-by-policy", false, "with --group: commit nothing from this consumer; the group's commit policy (ledge group set-policy) decides the committed offset on the node (default: true when the group has a policy; =false commits what is printed)")
	fs.BoolVar(&f.atMostOnce, "at-most-once", false, "with --group: the node commits each poll before it answers (a crash loses what was not printed; with --count, what a poll returned past the count is skipped)")
	fs.StringVar(&f.format, "format", "raw", "output format: raw or json")
	fs.IntSliceVarP(&f.partitions, "partition", "p", nil, "read only this partition (repeatable; default all)")
	fs.DurationVar(&f.maxWait, "max-wait", 5*time.Second, "with --follow, how long each long poll waits for records")
	fs.StringVar(&f.filter, "filter", "", "run this filter plugin on the node over every poll (see ledge plugin add)")
	fs.StringArrayVar(&f.params, "param", nil, "a --filter or --commit-policy parameter key=value (repeatable)")
	fs.StringVar(&f.key, "key", "", "print only the records with this key; the node wakes a --follow poll only for them")
	fs.StringVar(&f.keyPrefix, "key-prefix", "", "print only the records whose key starts with this prefix")
	fs.StringVar(&f.policy, "commit-policy", "", "attach this commit policy plugin to --consumer: the node commits what it proposes")
	return cmd
}

// keyOption maps --key or --key-prefix to the consumers' option; false
// when neither is given.
func (f *consumeFlags) keyOption() (sdk.KeyOption, bool, error) {
	switch {
	case f.key != "" && f.keyPrefix != "":
		return nil, false, errors.New("--key and --key-prefix: give one (a key is also its own prefix)")
	case f.key != "":
		return sdk.WithKey([]byte(f.key)), true, nil
	case f.keyPrefix != "":
		return sdk.WithKeyPrefix([]byte(f.keyPrefix)), true, nil
	}
	return nil, false, nil
}

// parseFrom maps --from to a position.
func parseFrom(s string, now time.Time) (sdk.Position, error) {
	switch strings.ToLower(s) {
	case "earliest", "first", "beginning":
		return sdk.AtFirst(), nil
	case "latest", "end":
		return sdk.AtEnd(), nil
	case "last":
		return sdk.AtLast(), nil
	case "committed", "next":
		return sdk.AtCommitted(), nil
	}
	if o, err := strconv.ParseUint(s, 10, 64); err == nil {
		return sdk.AtOffset(o), nil
	}
	if strings.HasPrefix(s, "-") {
		d, err := parseAge(s[1:])
		if err == nil {
			return sdk.AtTime(now.Add(-d)), nil
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return sdk.AtTime(t), nil
	}
	return sdk.Position{}, fmt.Errorf("--from %q: want earliest, latest, committed, an offset, an RFC 3339 time or -DURATION", s)
}

func runConsume(cmd *cobra.Command, cf *clientFlags, topic string, f *consumeFlags) error {
	f.policySet = cmd.Flags().Changed("commit-by-policy")
	if f.group != "" {
		return runGroupConsume(cmd, cf, topic, f.group, f)
	}
	if f.atMostOnce {
		return errors.New("--at-most-once needs --group GROUP (a named consumer commits with --commit)")
	}
	if f.policySet {
		return errors.New("--commit-by-policy needs --group GROUP (a named consumer's policy is attached with --commit-policy)")
	}
	if f.format != "raw" && f.format != "json" {
		return fmt.Errorf("--format %q: want raw or json", f.format)
	}
	if f.commit && f.consumer == "" {
		return errors.New("--commit needs --consumer NAME: only a named consumer has positions to commit")
	}
	if f.count < 0 {
		return errors.New("--count must not be negative")
	}
	reset, err := resetPolicy(f.reset)
	if err != nil {
		return err
	}
	var opts []sdk.ConsumerOption
	var fromOffset *uint64
	if f.from != "" {
		pos, err := parseFrom(f.from, time.Now())
		if err != nil {
			return err
		}
		if o, err := strconv.ParseUint(f.from, 10, 64); err == nil {
			fromOffset = &o
		}
		if pos == sdk.AtCommitted() && f.consumer == "" {
			return errors.New("--from committed needs --consumer NAME")
		}
		opts = append(opts, sdk.WithStart(pos))
	}
	if fromOffset != nil || f.reset != "" {
		opts = append(opts, sdk.WithResetPolicy(reset)) // an offset given out of range fails unless --reset
	}
	if f.consumer != "" {
		opts = append(opts, sdk.WithConsumerName(f.consumer))
	}
	pluginOpts, err := pluginConsumeOptions(f)
	if err != nil {
		return err
	}
	opts = append(opts, pluginOpts...)
	if k, ok, err := f.keyOption(); err != nil {
		return err
	} else if ok {
		opts = append(opts, k)
	}
	if len(f.partitions) > 0 {
		ps := make([]int32, len(f.partitions))
		for i, p := range f.partitions {
			if p < 0 || p > math.MaxInt32 {
				return fmt.Errorf("--partition %d: partitions are numbered from 0 up (ledge topic describe %s lists them)", p, topic)
			}
			ps[i] = int32(p)
		}
		opts = append(opts, sdk.WithPartitions(ps...))
	}
	wait := time.Duration(0)
	if f.follow {
		wait = f.maxWait
	}
	opts = append(opts, sdk.WithMaxWait(wait))
	if f.count > 0 {
		opts = append(opts, sdk.WithMaxMessages(min(f.count, sdk.DefaultMaxMessages)))
	}

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := cf.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var plan fromPlan
	if fromOffset != nil {
		if plan, err = planFrom(ctx, c, topic, f, *fromOffset); err != nil {
			return err
		}
	}
	cons, err := c.NewConsumer(ctx, topic, opts...)
	if err != nil {
		return err
	}
	defer cons.Close(context.WithoutCancel(ctx))
	if err := plan.apply(cons); err != nil {
		return err
	}

	out := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
	defer out.Flush()
	printed := 0
	failedInARow := 0
	for {
		recs, pollErr := cons.Poll(ctx)
		if pollErr == nil {
			failedInARow = 0
		}
		if pollErr != nil && ctx.Err() != nil {
			return nil // interrupted
		}
		recs = plan.keep(recs)
		if f.count > 0 && printed+len(recs) > f.count {
			recs = recs[:f.count-printed]
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
		if f.commit && len(recs) > 0 {
			if err := cons.Commit(context.WithoutCancel(ctx), recs...); err != nil {
				return fmt.Errorf("commit: %w", err)
			}
		}
		sdk.Recycle(recs)
		switch {
		case pollErr != nil && f.follow && sdk.IsRetryable(pollErr):
			// The node restarted or the network moved: keep following.
			// The first retry goes at once (a restarted node that reset
			// the connection is usually back already); further ones a
			// second apart, so a node that is down is not hammered.
			failedInARow++
			switch {
			case !errors.Is(pollErr, sdk.ErrBusy):
				fmt.Fprintf(cmd.ErrOrStderr(), "ledge: %s; retrying\n", explain(pollErr))
			case failedInARow == 1: // the consumer waits the node's retry-after itself
				fmt.Fprintln(cmd.ErrOrStderr(), "ledge: node busy, retrying")
			}
			if failedInARow > 1 {
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
					return nil
				}
			}
		case pollErr != nil:
			return pollErr
		case f.count > 0 && printed >= f.count:
			return nil
		case len(recs) == 0 && !f.follow:
			return nil
		}
	}
}

type recordJSON struct {
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	Offset      uint64       `json:"offset"`
	Timestamp   string       `json:"timestamp"`
	Key         *string      `json:"key,omitempty"`
	KeyBase64   string       `json:"key_base64,omitempty"`
	Value       *string      `json:"value,omitempty"`
	ValueBase64 string       `json:"value_base64,omitempty"`
	Headers     []headerJSON `json:"headers,omitempty"`
	NullValue   bool         `json:"null_value,omitempty"`
}

type headerJSON struct {
	Key         string  `json:"key"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 string  `json:"value_base64,omitempty"`
}

// textOrBase64 returns b as a string when it is UTF-8, else its base64.
func textOrBase64(b []byte) (*string, string) {
	if b == nil {
		return nil, ""
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	return nil, base64.StdEncoding.EncodeToString(b)
}

func printRecord(w io.Writer, format string, r *sdk.Record) error {
	if format == "raw" {
		if _, err := w.Write(r.Value); err != nil {
			return err
		}
		_, err := w.Write([]byte{'\n'})
		return err
	}
	j := recordJSON{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Timestamp: r.Timestamp.UTC().Format(time.RFC3339Nano), NullValue: r.Value == nil}
	j.Key, j.KeyBase64 = textOrBase64(r.Key)
	j.Value, j.ValueBase64 = textOrBase64(r.Value)
	for _, h := range r.Headers {
		hj := headerJSON{Key: h.Key}
		hj.Value, hj.ValueBase64 = textOrBase64(h.Value)
		j.Headers = append(j.Headers, hj)
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// groupDelivery is the delivery a group consumer asks for: none when no
// flag says, so that it follows the group's commit policy if there is one.
func groupDelivery(f *consumeFlags) ([]sdk.GroupOption, error) {
	switch {
	case f.atMostOnce && f.byPolicy:
		return nil, errors.New("--at-most-once and --commit-by-policy exclude each other: the node commits at delivery, or the group's policy decides")
	case f.atMostOnce:
		return []sdk.GroupOption{sdk.WithDelivery(sdk.AtMostOnce)}, nil
	case f.policySet && f.byPolicy:
		return []sdk.GroupOption{sdk.WithDelivery(sdk.CommitByPolicy)}, nil
	case f.policySet:
		return []sdk.GroupOption{sdk.WithDelivery(sdk.AtLeastOnce)}, nil
	}
	return nil, nil
}

// deliveryLine says who commits a group consumer's records.
func deliveryLine(group string, g *sdk.GroupConsumer) string {
	switch {
	case g.GroupPolicy() != "":
		return fmt.Sprintf("ledge: group %s: its commit policy %s decides the commits (--commit-by-policy=false commits what is printed)", group, g.GroupPolicy())
	case g.Delivery() == sdk.CommitByPolicy:
		return fmt.Sprintf("ledge: group %s: the group's commit policy decides the commits (--commit-by-policy); without one nothing is committed", group)
	case g.Delivery() == sdk.AtMostOnce:
		return fmt.Sprintf("ledge: group %s: the node commits each poll as it answers (--at-most-once)", group)
	}
	return fmt.Sprintf("ledge: group %s: commits what is printed (at least once)", group)
}
