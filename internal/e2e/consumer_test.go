package e2e

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/sdk"
)

func produceValues(t *testing.T, c *sdk.Client, topic string, values ...string) []*sdk.Record {
	t.Helper()
	ctx := testContext(t)
	p, err := c.NewProducer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	recs := make([]*sdk.Record, len(values))
	for i, v := range values {
		recs[i] = &sdk.Record{Value: []byte(v)}
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	return recs
}

func valuesOf(recs []*sdk.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

// pollAll polls until n records came back.
func pollAll(t *testing.T, cons *sdk.Consumer, n int) []*sdk.Record {
	t.Helper()
	ctx := testContext(t)
	var out []*sdk.Record
	for len(out) < n {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d records: %v", len(out), err)
		}
		out = append(out, recs...)
	}
	return out
}

// TestLongPollAnsweredByProduce parks a poll, then produces: the poll
// returns the record.
func TestLongPollAnsweredByProduce(t *testing.T) {
	n := startNode(t, nil)
	c := dial(t, n)
	ctx := testContext(t)
	createTopic(t, c, "events", sdk.TopicConfig{})
	cons, err := c.NewConsumer(ctx, "events", sdk.WithMaxWait(safety))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		recs []*sdk.Record
		err  error
	}
	done := make(chan result, 1)
	go func() {
		recs, err := cons.Poll(ctx)
		done <- result{recs, err}
	}()
	// Produce only once the poll is parked on the node. (Counting requests
	// in flight raced with the topic's creation: its reply could still be
	// counted when the count was read, and the poll then only matched it.)
	for n.ParkedPolls() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the poll never reached the node")
		}
		runtime.Gosched()
	}
	produceValues(t, c, "events", "wake up")
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := valuesOf(r.recs); !slices.Equal(got, []string{"wake up"}) {
		t.Fatalf("the long poll returned %q", got)
	}
}

// TestNamedConsumerFenced: a second process attaching under the same name
// fences the first, whose polls and commits fail with the typed error.
func TestNamedConsumerFenced(t *testing.T) {
	n := startNode(t, nil)
	c := dial(t, n)
	ctx := testContext(t)
	createTopic(t, c, "jobs", sdk.TopicConfig{})
	produceValues(t, c, "jobs", "a", "b", "c")

	first, err := c.NewConsumer(ctx, "jobs", sdk.WithConsumerName("worker"), sdk.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	recs := pollAll(t, first, 3)

	other := dial(t, n) // another process
	second, err := other.NewConsumer(ctx, "jobs", sdk.WithConsumerName("worker"), sdk.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	if second.Session() <= first.Session() {
		t.Fatalf("second session %d, first %d", second.Session(), first.Session())
	}

	err = first.Commit(ctx, recs...)
	if !errors.Is(err, sdk.ErrFencedSession) || !errors.Is(err, fence.ErrFencedSession) {
		t.Fatalf("commit of the fenced consumer: %v, want ErrFencedSession", err)
	}
	var fe *fence.Error
	if !errors.As(err, &fe) || fe.Action != fence.GiveUp {
		t.Fatalf("commit error %v carries no fence.Error with action give-up", err)
	}
	if sdk.IsRetryable(err) {
		t.Fatalf("a fenced session is not retryable: %v", err)
	}
	if _, err := first.Poll(ctx); !errors.Is(err, sdk.ErrFencedSession) {
		t.Fatalf("poll of the fenced consumer: %v, want ErrFencedSession", err)
	}

	// The second process resumes where nothing was committed.
	got := pollAll(t, second, 3)
	if err := second.Commit(ctx, got...); err != nil {
		t.Fatal(err)
	}
	co, err := second.Committed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(co) != 1 || !co[0].Committed || co[0].Offset != 3 {
		t.Fatalf("committed %+v, want offset 3", co)
	}
}

// TestPurgeFencesCommit: a commit from a poll made before a purge is
// refused as stale; the consumer resumes at the new start and sees what
// is produced after the purge.
func TestPurgeFencesCommit(t *testing.T) {
	n := startNode(t, nil)
	c := dial(t, n)
	ctx := testContext(t)
	createTopic(t, c, "logs", sdk.TopicConfig{})
	produceValues(t, c, "logs", "old1", "old2")
	cons, err := c.NewConsumer(ctx, "logs", sdk.WithConsumerName("reader"), sdk.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	recs := pollAll(t, cons, 2)
	states, err := c.Purge(ctx, "logs")
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 1 || states[0].StartOffset != 2 || states[0].History != 2 {
		t.Fatalf("after purge: %+v", states)
	}
	err = cons.Commit(ctx, recs...)
	if !errors.Is(err, sdk.ErrStaleHistory) || !sdk.IsRetryable(err) {
		t.Fatalf("commit across a purge: %v, want a retryable ErrStaleHistory", err)
	}
	produceValues(t, c, "logs", "new")
	got := pollAll(t, cons, 1)
	if v := valuesOf(got); !slices.Equal(v, []string{"new"}) || got[0].Offset != 2 {
		t.Fatalf("after the purge the consumer read %q at offset %d", v, got[0].Offset)
	}
	if err := cons.Commit(ctx, got...); err != nil {
		t.Fatal(err)
	}
}

// TestSeekAndResetPosition moves the reading position and, with a reset,
// the committed one, backwards.
func TestSeekAndResetPosition(t *testing.T) {
	n := startNode(t, nil)
	c := dial(t, n)
	ctx := testContext(t)
	createTopic(t, c, "s", sdk.TopicConfig{})
	produceValues(t, c, "s", "0", "1", "2", "3", "4")
	cons, err := c.NewConsumer(ctx, "s", sdk.WithConsumerName("x"), sdk.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	recs := pollAll(t, cons, 5)
	if err := cons.Commit(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	if err := cons.Seek(0, sdk.AtOffset(3)); err != nil {
		t.Fatal(err)
	}
	if v := valuesOf(pollAll(t, cons, 2)); !slices.Equal(v, []string{"3", "4"}) {
		t.Fatalf("after Seek(3): %q", v)
	}
	off, err := cons.ResetPosition(ctx, 0, sdk.AtOffset(1))
	if err != nil || off != 1 {
		t.Fatalf("ResetPosition: %d, %v", off, err)
	}
	co, err := cons.Committed(ctx)
	if err != nil || co[0].Offset != 1 {
		t.Fatalf("committed after reset: %+v, %v", co, err)
	}
	if v := valuesOf(pollAll(t, cons, 4)); !slices.Equal(v, []string{"1", "2", "3", "4"}) {
		t.Fatalf("after ResetPosition(1): %q", v)
	}
	// A fresh process under the name resumes at the committed offset.
	again, err := dial(t, n).NewConsumer(ctx, "s", sdk.WithConsumerName("x"), sdk.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	if v := valuesOf(pollAll(t, again, 4)); !slices.Equal(v, []string{"1", "2", "3", "4"}) {
		t.Fatalf("a new session resumed with %q", v)
	}
}

// TestAutoCommitOnNextPoll: each poll commits what the previous one
// returned; Close commits the last.
func TestAutoCommitOnNextPoll(t *testing.T) {
	n := startNode(t, nil)
	c := dial(t, n)
	ctx := testContext(t)
	createTopic(t, c, "a", sdk.TopicConfig{})
	produceValues(t, c, "a", "x", "y")
	cons, err := c.NewConsumer(ctx, "a", sdk.WithConsumerName("auto"), sdk.WithMaxWait(0),
		sdk.WithAutoCommit(sdk.AutoCommitOnNextPoll), sdk.WithMaxMessages(1))
	if err != nil {
		t.Fatal(err)
	}
	pollAll(t, cons, 2)
	if err := cons.Close(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := c.NewConsumer(ctx, "a", sdk.WithConsumerName("auto"))
	if err != nil {
		t.Fatal(err)
	}
	co, err := again.Committed(ctx)
	if err != nil || !co[0].Committed || co[0].Offset != 2 {
		t.Fatalf("committed %+v, %v; want 2", co, err)
	}
}

// TestCompressionAndHeaders round-trips records through each codec.
func TestCompressionAndHeaders(t *testing.T) {
	n := startNode(t, nil)
	c := dial(t, n)
	ctx := testContext(t)
	for _, comp := range []sdk.Compression{sdk.CompressionNone, sdk.CompressionS2, sdk.CompressionZstd} {
		topic := "c-" + comp.String()
		createTopic(t, c, topic, sdk.TopicConfig{Compression: comp, Partitions: 2})
		p, err := c.NewProducer(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		var recs []*sdk.Record
		for i := range 200 {
			recs = append(recs, &sdk.Record{
				Key:     []byte(fmt.Sprintf("key-%d", i%5)),
				Value:   []byte(fmt.Sprintf("a fairly repetitive value number %d, repetitive", i)),
				Headers: []sdk.Header{{Key: "n", Value: []byte(fmt.Sprint(i))}, {Key: "null"}},
			})
		}
		if err := p.ProduceSync(ctx, recs...); err != nil {
			t.Fatal(err)
		}
		_ = p.Close(ctx)
		cons, err := c.NewConsumer(ctx, topic, sdk.WithMaxWait(0))
		if err != nil {
			t.Fatal(err)
		}
		got := pollAll(t, cons, 200)
		byValue := map[string]*sdk.Record{}
		for _, r := range got {
			byValue[string(r.Value)] = r
		}
		for _, want := range recs {
			r := byValue[string(want.Value)]
			switch {
			case r == nil:
				t.Fatalf("%s: %q missing", comp, want.Value)
			case string(r.Key) != string(want.Key) || r.Partition != want.Partition || r.Offset != want.Offset:
				t.Fatalf("%s: got %s/%d@%d key %q, produced %d@%d key %q", comp, r.Topic, r.Partition, r.Offset, r.Key, want.Partition, want.Offset, want.Key)
			case len(r.Headers) != 2 || string(r.Headers[0].Value) != string(want.Headers[0].Value) || r.Headers[1].Value != nil:
				t.Fatalf("%s: headers %+v, want %+v", comp, r.Headers, want.Headers)
			}
		}
	}
}

// TestErrorsAreTyped checks the errors a caller tests for.
func TestErrorsAreTyped(t *testing.T) {
	n := startNode(t, nil)
	c := dial(t, n)
	ctx := testContext(t)
	if _, err := c.DescribeTopic(ctx, "nope"); !errors.Is(err, sdk.ErrUnknownTopic) || sdk.IsRetryable(err) {
		t.Fatalf("describe of a missing topic: %v", err)
	}
	createTopic(t, c, "t", sdk.TopicConfig{})
	if _, err := c.CreateTopic(ctx, "t", sdk.TopicConfig{}); !errors.Is(err, sdk.ErrTopicExists) {
		t.Fatalf("create twice: %v", err)
	}
	if _, err := sdk.Dial(ctx, n.Addr(), sdk.WithDataDir(n.Paths().DataDir), sdk.WithToken("garbage")); !errors.Is(err, sdk.ErrUnauthenticated) {
		t.Fatalf("dial with a bad token: %v", err)
	}
	_, secret, err := c.CreateToken(ctx, sdk.TokenSpec{Topic: "t", Scopes: sdk.ScopeConsume})
	if err != nil {
		t.Fatal(err)
	}
	reader := dial(t, n, sdk.WithToken(secret))
	if _, err := reader.NewProducer(ctx, "t"); !errors.Is(err, sdk.ErrForbidden) {
		t.Fatalf("producer with a consume-only token: %v", err)
	}
	if _, err := reader.NewConsumer(ctx, "t", sdk.WithPartitions(5)); !errors.Is(err, sdk.ErrUnknownPartition) {
		t.Fatalf("consumer of a missing partition: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.ListTopics(cctx); !errors.Is(err, context.Canceled) || sdk.IsRetryable(err) {
		t.Fatalf("a cancelled request: %v", err)
	}
}
