package sdk_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

// keyedValues returns "offset:key=value" for each record.
func keyedValues(recs []*sdk.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, r.Value))
	}
	return out
}

// A device's consumer polls a commands topic for its own key: it receives
// its commands alone, with their offsets, and a named one that commits
// and comes back neither reads the other devices' commands nor skips one
// of its own. A prefix consumer receives every key under its prefix.
func TestConsumerWithKeyReadsOnlyItsCommands(t *testing.T) {
	ctx, c := dialTestNode(t)
	topic := createTopic(ctx, t, c, "commands")
	p, err := c.NewProducer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	send := func(kv ...string) {
		t.Helper()
		for i := 0; i < len(kv); i += 2 {
			if err := p.ProduceSync(ctx, &sdk.Record{Key: []byte(kv[i]), Value: []byte(kv[i+1])}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send("dev-1", "a", "dev-2", "b", "dev-1", "c", "dev-10", "d")

	poll := func(name string, opt sdk.KeyOption) []string {
		t.Helper()
		cons, err := c.NewConsumer(ctx, topic, sdk.WithConsumerName(name), opt,
			sdk.WithAutoCommit(sdk.AutoCommitOnDelivery), sdk.WithMaxWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close(ctx)
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return keyedValues(recs)
	}
	if got := fmt.Sprint(poll("dev-1", sdk.WithKey([]byte("dev-1")))); got != "[0:dev-1=a 2:dev-1=c]" {
		t.Fatalf("dev-1 polled %s", got)
	}
	if got := fmt.Sprint(poll("site", sdk.WithKeyPrefix([]byte("dev-1")))); got != "[0:dev-1=a 2:dev-1=c 3:dev-10=d]" {
		t.Fatalf("prefix dev-1 polled %s", got)
	}

	// dev-1 committed past the other keys: it resumes with its next
	// command, however many others came before it.
	send("dev-2", "e", "dev-3", "f", "dev-1", "g")
	if got := fmt.Sprint(poll("dev-1", sdk.WithKey([]byte("dev-1")))); got != "[6:dev-1=g]" {
		t.Fatalf("dev-1 after its commit polled %s", got)
	}
}

// A long key poll waits for its own key: a command to another device
// does not answer it, its own does.
func TestConsumerWithKeyWaitsForItsOwnCommand(t *testing.T) {
	ctx, c := dialTestNode(t)
	topic := createTopic(ctx, t, c, "commands-wait")
	cons, err := c.NewConsumer(ctx, topic, sdk.WithKey([]byte("dev-7")), sdk.WithStart(sdk.AtEnd()), sdk.WithMaxWait(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	got := make(chan []string, 1)
	go func() {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- keyedValues(recs)
	}()
	p, err := c.NewProducer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	// Sent until the poll answers: the poll may start at the end after
	// the first ones.
	for i := 0; ; i++ {
		for _, k := range []string{"dev-8", "dev-7"} {
			if err := p.ProduceSync(ctx, &sdk.Record{Key: []byte(k), Value: []byte(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case recs := <-got:
			if len(recs) == 0 {
				t.Fatalf("the key poll answered empty after %d rounds", i+1)
			}
			for _, r := range recs {
				if !strings.Contains(r, ":dev-7=") {
					t.Fatalf("the key poll of dev-7 answered %v", recs)
				}
			}
			return
		case <-time.After(50 * time.Millisecond):
		}
		if i == 100 {
			t.Fatal("the key poll never answered")
		}
	}
}

// A group member that polls with a key receives that key's records
// alone, and its commits move the group past the others.
func TestGroupConsumerWithKey(t *testing.T) {
	ctx, c := dialTestNode(t)
	topic := createTopic(ctx, t, c, "commands-group")
	p, err := c.NewProducer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	for _, kv := range [][2]string{{"dev-1", "a"}, {"dev-2", "b"}, {"dev-1", "c"}} {
		if err := p.ProduceSync(ctx, &sdk.Record{Key: []byte(kv[0]), Value: []byte(kv[1])}); err != nil {
			t.Fatal(err)
		}
	}
	g := joinGroup(ctx, t, c, fmt.Sprintf("dev-1-%d", time.Now().UnixNano()), topic, sdk.WithKey([]byte("dev-1")))
	_, recs := pollUntil(ctx, t, g, 2)
	if got := fmt.Sprint(keyedValues(recs)); got != "[0:dev-1=a 2:dev-1=c]" {
		t.Fatalf("the member of key dev-1 polled %s", got)
	}
}
