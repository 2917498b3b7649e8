package e2e

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
)

// Polls and produces without a plugin never wait behind plugin code:
// while a looping filter holds the node's only plugin worker (its
// deadline is on a clock that stands still until the test moves it), an
// honest client produces and polls twenty records one by one, and every
// poll answers with its record; only then is the loop cut off, and its
// consumer hears of it. A call of another plugin, meanwhile, waits for
// the worker.
func TestPluginFreePollsNeverWaitBehindPluginCode(t *testing.T) {
	const honest = 20
	clock := &standingClock{}
	clock.ns.Store(time.Now().UnixNano())
	spinning := make(chan struct{}, 16)
	n := pluginNode(t, func(cfg *node.Config) {
		cfg.MaxPollWait = time.Hour
		cfg.Plugins.Now = clock.Now
		cfg.Plugins.MaxConcurrentCalls = 1
		cfg.Plugins.Logger = slog.New(&signalHandler{match: "spinning", signal: spinning})
	})
	c := dial(t, n)
	ctx := testContext(t)
	createTopic(t, c, "honest", sdk.TopicConfig{Partitions: 1})
	createTopic(t, c, "bait", sdk.TopicConfig{Partitions: 1})
	hostile := buildPlugin(t, hostilePkg)
	for _, name := range []string{"loop", "other"} {
		if _, err := c.AddPlugin(ctx, name, sdk.PluginFilter, hostile); err != nil {
			t.Fatal(err)
		}
	}
	produce(t, c, "bait", &sdk.Record{Value: []byte("bait")})

	// The loop's poll may wait an hour: only its deadline ends it.
	looped := make(chan error, 1)
	loopConsumer, err := dial(t, n).NewConsumer(ctx, "bait", sdk.WithMaxWait(time.Hour), sdk.WithPrefetch(false),
		sdk.WithStart(sdk.AtFirst()), sdk.WithFilter("loop", map[string]string{"do": "spin"}))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, err := loopConsumer.Poll(ctx); looped <- err }()
	<-spinning

	otherDone := make(chan error, 1)
	otherConsumer, err := dial(t, n).NewConsumer(ctx, "bait", sdk.WithMaxWait(time.Hour), sdk.WithPrefetch(false),
		sdk.WithStart(sdk.AtFirst()), sdk.WithFilter("other", map[string]string{"do": "ok"}))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		rs, err := otherConsumer.Poll(ctx)
		if err == nil && len(rs) != 1 {
			err = errors.New("the other plugin's poll got no record")
		}
		otherDone <- err
	}()

	p, err := c.NewProducer(ctx, "honest")
	if err != nil {
		t.Fatal(err)
	}
	cons, err := c.NewConsumer(ctx, "honest", sdk.WithMaxWait(0), sdk.WithPrefetch(false))
	if err != nil {
		t.Fatal(err)
	}
	answered := 0
	for i := range honest {
		if err := p.ProduceSync(ctx, &sdk.Record{Value: []byte("honest")}); err != nil {
			t.Fatalf("produce %d beside the loop: %v", i, err)
		}
		rs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatalf("poll %d beside the loop: %v", i, err)
		}
		answered += len(rs)
	}
	select {
	case err := <-looped:
		t.Fatalf("the loop ended before the honest client was done: %v", err)
	case err := <-otherDone:
		t.Fatalf("the other plugin ran while the loop held the only worker: %v", err)
	default:
	}
	if answered != honest {
		t.Fatalf("%d of %d honest polls answered with their record while the loop held the only plugin worker", answered, honest)
	}

	clock.Advance(time.Hour)
	if err := <-looped; !errors.Is(err, sdk.ErrPluginTimeout) || !strings.Contains(err.Error(), "loop") {
		t.Fatalf("the loop's consumer: %v, want a timeout naming the plugin", err)
	}
	if err := <-otherDone; err != nil {
		t.Fatalf("the other plugin's consumer, once the worker was free: %v", err)
	}
}

// standingClock is a clock that moves only when told to.
type standingClock struct{ ns atomic.Int64 }

func (c *standingClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *standingClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// signalHandler is a log handler that sends on signal for each record
// whose message contains match, when signal has room.
type signalHandler struct {
	match  string
	signal chan struct{}
}

func (h *signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *signalHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		select {
		case h.signal <- struct{}{}:
		default:
		}
	}
	return nil
}
func (h *signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *signalHandler) WithGroup(string) slog.Handler      { return h }
