package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
	"github.com/ledgemq/ledge/transport/wire"
)

// These tests run a GroupConsumer against the node the test binary starts
// (example_node_test.go), where the fake node of the package's own tests
// cannot say what a real one answers.

// dialTestNode dials the test node as its admin, with a minute for the
// test's requests.
func dialTestNode(t *testing.T) (context.Context, *sdk.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	c, err := sdk.Dial(ctx, nodeAddr, sdk.WithDataDir(nodeDataDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return ctx, c
}

// createTopic creates a topic of one partition named after base, new in
// each run of the test (go test -count), and returns its name.
func createTopic(ctx context.Context, t *testing.T, c *sdk.Client, base string) string {
	t.Helper()
	topic := fmt.Sprintf("%s-%d", base, time.Now().UnixNano())
	if _, err := c.CreateTopic(ctx, topic, sdk.TopicConfig{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	return topic
}

// produceBatch writes values to a topic as one batch: the producer holds
// them until Flush sends them together.
func produceBatch(ctx context.Context, t *testing.T, c *sdk.Client, topic string, values ...string) {
	t.Helper()
	p, err := c.NewProducer(ctx, topic, sdk.WithLinger(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	var mu sync.Mutex
	var errs []error
	for _, v := range values {
		p.Produce(ctx, &sdk.Record{Value: []byte(v)}, func(_ *sdk.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// produceEach writes values to a topic one at a time: each is a batch of
// its own.
func produceEach(ctx context.Context, t *testing.T, c *sdk.Client, topic string, values ...string) {
	t.Helper()
	for _, v := range values {
		produceBatch(ctx, t, c, topic, v)
	}
}

func joinGroup(ctx context.Context, t *testing.T, c *sdk.Client, group, topic string, opts ...sdk.GroupOption) *sdk.GroupConsumer {
	t.Helper()
	g, err := c.NewGroupConsumer(ctx, group, []string{topic}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	return g
}

// pollUntil polls until it has n records, and returns each non-empty
// poll's values. Twenty polls without them fail the test.
func pollUntil(ctx context.Context, t *testing.T, g *sdk.GroupConsumer, n int) (polls [][]string, recs []*sdk.Record) {
	t.Helper()
	for range 20 {
		got, err := g.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d records: %v", len(recs), err)
		}
		if len(got) == 0 {
			continue
		}
		var vs []string
		for _, r := range got {
			vs = append(vs, string(r.Value))
		}
		polls, recs = append(polls, vs), append(recs, got...)
		if len(recs) >= n {
			return polls, recs
		}
	}
	t.Fatalf("twenty polls returned %d records of %d: %q", len(recs), n, polls)
	return nil, nil
}

// WithGroupMaxMessages(2): every poll holds at most two records, except
// one whose first batch alone holds more (a batch is never split), and
// every record arrives once, in order.
func TestGroupMaxMessages(t *testing.T) {
	ctx, c := dialTestNode(t)
	topic := createTopic(ctx, t, c, "group-max-messages")
	produceEach(ctx, t, c, topic, "r0", "r1", "r2", "r3", "r4")
	produceBatch(ctx, t, c, topic, "b0", "b1", "b2")
	produceEach(ctx, t, c, topic, "r5")
	want := []string{"r0", "r1", "r2", "r3", "r4", "b0", "b1", "b2", "r5"}

	g := joinGroup(ctx, t, c, topic, topic, sdk.WithGroupMaxMessages(2))
	polls, _ := pollUntil(ctx, t, g, len(want))
	var got []string
	for _, p := range polls {
		if len(p) > 2 && !slices.Equal(p, []string{"b0", "b1", "b2"}) {
			t.Errorf("a poll of %d records %q, with at most 2 asked and no batch that large among them", len(p), p)
		}
		if i := slices.Index(p, "b0"); i >= 0 && !slices.Equal(p[i:min(i+3, len(p))], []string{"b0", "b1", "b2"}) {
			t.Errorf("the batch b0-b2 was split: a poll returned %q", p)
		}
		got = append(got, p...)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("records across the polls %q:\n got %q\nwant %q", polls, got, want)
	}
}

// workerHoldingTwoRecords creates a topic named after base with records a
// and b, joins a group of its name as member "worker-1" and polls both:
// it returns the topic (the group's name too), the member, its records
// and the OnLost calls it will receive.
func workerHoldingTwoRecords(ctx context.Context, t *testing.T, c *sdk.Client, base string) (string, *sdk.GroupConsumer, []*sdk.Record, *[]string) {
	t.Helper()
	topic := createTopic(ctx, t, c, base)
	produceEach(ctx, t, c, topic, "a", "b")
	lost := new([]string)
	old := joinGroup(ctx, t, c, topic, topic, sdk.WithMemberID("worker-1"),
		sdk.OnLost(func(_ context.Context, tps []sdk.TopicPartition) { *lost = append(*lost, fmt.Sprint(tps)) }))
	_, recs := pollUntil(ctx, t, old, 2)
	return topic, old, recs, lost
}

// A process restarted under a member's id (WithMemberID) replaces the
// member's earlier incarnation at once. The earlier one, still running,
// learns it from the node's refusals: while the new one holds the
// partition, Committed answers for it with ErrStaleMemberEpoch; once the
// new one has left, the group does not know the member any more, and a
// late commit is refused with ErrUnknownMember, of the rejoin class, and
// commits nothing. The next Poll calls OnLost, rejoins, and reads the
// records again: nothing was lost.
func TestGroupReplacedMemberLateCommit(t *testing.T) {
	ctx, c := dialTestNode(t)
	topic, old, recs, lost := workerHoldingTwoRecords(ctx, t, c, "replaced-member")
	group := topic

	restarted := joinGroup(ctx, t, c, group, topic, sdk.WithMemberID("worker-1"))
	committed := onlyCommitted(ctx, t, old)
	if !errors.Is(committed.Err, sdk.ErrStaleMemberEpoch) {
		t.Fatalf("the replaced member's Committed: %+v, want ErrStaleMemberEpoch", committed)
	}
	if err := restarted.Close(ctx); err != nil {
		t.Fatal(err)
	}
	committed = onlyCommitted(ctx, t, old)
	if !errors.Is(committed.Err, sdk.ErrUnknownMember) {
		t.Fatalf("Committed once the member left: %+v, want ErrUnknownMember", committed)
	}

	err := old.Commit(ctx, recs...)
	if !errors.Is(err, sdk.ErrUnknownMember) || errors.Is(err, sdk.ErrFencedMember) {
		t.Fatalf("the late commit: %v, want ErrUnknownMember", err)
	}
	var e *sdk.Error
	if !errors.As(err, &e) || e.Status.RetryClass() != wire.ClassRejoin || sdk.IsRetryable(err) {
		t.Fatalf("the late commit's error %v: want the rejoin class, not retryable", err)
	}
	d, err := c.DescribeGroup(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Offsets) != 1 || d.Offsets[0].Committed {
		t.Fatalf("the group's offsets after the refused commit: %+v, want nothing committed", d.Offsets)
	}

	polls, _ := pollUntil(ctx, t, old, 2)
	if !slices.Equal(*lost, []string{"[" + topic + "/0]"}) {
		t.Errorf("OnLost calls %q, want one for %s/0", *lost, topic)
	}
	if fmt.Sprint(polls) != "[[a b]]" {
		t.Errorf("after rejoining the member read %q, want the two uncommitted records again", polls)
	}
	if err := old.CommitPolled(ctx); err != nil {
		t.Fatalf("the rejoined member's commit: %v", err)
	}
}

// A member whose partition moved on after a rebalance (here: a process
// restarted under its id received it) has its commit refused with
// ErrStaleMemberEpoch, of the refresh class: it loses the partition
// (OnLost) and sends nothing more for it, so a second commit of the same
// records fails at once with ErrNotAssigned.
func TestGroupCommitAfterTheAssignmentMoved(t *testing.T) {
	ctx, c := dialTestNode(t)
	topic, old, recs, lost := workerHoldingTwoRecords(ctx, t, c, "moved-assignment")
	group := topic
	joinGroup(ctx, t, c, group, topic, sdk.WithMemberID("worker-1"))

	err := old.Commit(ctx, recs...)
	var e *sdk.Error
	if !errors.Is(err, sdk.ErrStaleMemberEpoch) || !errors.As(err, &e) || e.Status.RetryClass() != wire.ClassRefresh {
		t.Fatalf("the commit of the moved partition: %v, want ErrStaleMemberEpoch of the refresh class", err)
	}
	if !slices.Equal(*lost, []string{"[" + topic + "/0]"}) {
		t.Errorf("OnLost calls %q, want one for %s/0", *lost, topic)
	}
	if err := old.Commit(ctx, recs...); !errors.Is(err, sdk.ErrNotAssigned) {
		t.Fatalf("a second commit: %v, want ErrNotAssigned", err)
	}
	if got := old.Assignment(); len(got) != 0 {
		t.Fatalf("the member still lists %v as its own", got)
	}
}

// onlyCommitted returns the one partition of g's Committed.
func onlyCommitted(ctx context.Context, t *testing.T, g *sdk.GroupConsumer) sdk.GroupCommitted {
	t.Helper()
	cs, err := g.Committed(ctx)
	if err != nil || len(cs) != 1 {
		t.Fatalf("Committed: %d partitions, %v", len(cs), err)
	}
	return cs[0]
}
