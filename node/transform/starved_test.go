package transform

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgemq/ledge/plugins"
)

// hostPlugin is the pass-through plugin behind a plugin host the test
// controls: while its workers are held, each call waits until the test
// says its wait ran out (a turn) and then fails as the host fails a call
// that never got a worker; while set to time out, each call fails as the
// host fails a plugin that ran past its deadline.
type hostPlugin struct {
	*fakePlugin
	held     atomic.Bool
	turns    chan struct{}
	timesOut atomic.Bool
}

func (p *hostPlugin) TransformFunc(ctx context.Context, name string, params plugins.Params, v *plugins.View, state []byte,
	use func(plugins.TransformResult) error) error {
	if p.held.Load() {
		select {
		case <-p.turns:
		case <-ctx.Done():
		}
		return fmt.Errorf("%w: %q: waiting for one of the 1 plugin workers: %w", plugins.ErrBusy, name, context.DeadlineExceeded)
	}
	if p.timesOut.Load() {
		return fmt.Errorf("%w: %q: ledge_transform ran past its deadline of 100ms", plugins.ErrTimeout, name)
	}
	return p.fakePlugin.TransformFunc(ctx, name, params, v, state, use)
}

// withHostPlugin replaces the world's manager by one whose plugin is a
// hostPlugin over the world's fake plugin.
func withHostPlugin(w *world) *hostPlugin {
	p := &hostPlugin{fakePlugin: w.plugin, turns: make(chan struct{})}
	w.mgr.Close()
	w.mgr = NewManager(ManagerConfig{Meta: w.meta, Groups: w.groups, Producers: w.prods, Plugin: p,
		Topics: w.topicOf, Backoff: func(int) time.Duration { return 50 * time.Millisecond }})
	return p
}

// starve lets n calls find every worker busy for their whole wait.
func (p *hostPlugin) starve(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		select {
		case p.turns <- struct{}{}:
		case <-time.After(20 * time.Second):
			t.Fatalf("the transform made %d calls while the workers were held, want %d", i, n)
		}
	}
}

// A transform whose calls find every worker of the plugin host busy for
// their whole wait holds nothing against its plugin: it makes the call
// again, counting no failure (so the host never quarantines the plugin
// for it), says in its status why it waits, and moves on once a worker
// is free, every record once.
func TestStarvedCallsAreMadeAgainNotFailures(t *testing.T) {
	w := newWorld(t)
	p := withHostPlugin(w)
	defer w.mgr.Close()
	w.createTopic("in", 1)
	w.createTopic("out", 1)
	w.produce("in", 0, numbered("s", 0, 3)...)
	p.held.Store(true)
	addPass(t, w, "copy")

	p.starve(t, 6) // the sixth is made once the fifth was noted
	st := mustStatus(t, w, "copy").Partitions[0]
	if st.PluginFailures != 0 || st.Errors != 0 || st.Committed != 0 || !strings.Contains(st.LastError, "plugin busy") {
		t.Fatalf("status while starved: %+v, want no failure counted, nothing committed, and the reason", st)
	}

	p.held.Store(false)
	close(p.turns) // the call waiting now fails as busy too, and is made again
	w.waitFor("the transform caught up", w.caughtUp("copy"))
	if got := values(w.read("out", 0)); !slices.Equal(got, numbered("s", 0, 3)) {
		t.Fatalf("output: %q, want every record once", got)
	}
	st = mustStatus(t, w, "copy").Partitions[0]
	if st.PluginFailures != 0 || st.Errors != 0 || st.LastError != "" || st.RecordsIn != 3 {
		t.Fatalf("status once a worker is free: %+v", st)
	}
}

// A plugin that runs past its deadline is its own failure, as before:
// each call counts, the input stays where it was, and the status says
// the deadline.
func TestTimedOutCallsAreFailures(t *testing.T) {
	w := newWorld(t)
	p := withHostPlugin(w)
	defer w.mgr.Close()
	w.createTopic("in", 1)
	w.createTopic("out", 1)
	w.produce("in", 0, numbered("t", 0, 3)...)
	p.timesOut.Store(true)
	addPass(t, w, "copy")
	w.waitFor("the plugin failed twice", func() bool {
		info, _ := w.mgr.Status("copy")
		return len(info.Partitions) == 1 && info.Partitions[0].PluginFailures >= 2 && info.Partitions[0].Errors >= 2
	})
	st := mustStatus(t, w, "copy").Partitions[0]
	if st.Committed != 0 || !strings.Contains(st.LastError, "ran past its deadline") {
		t.Fatalf("status while the plugin times out: %+v", st)
	}
	p.timesOut.Store(false)
	w.waitFor("the transform caught up", w.caughtUp("copy"))
	if got := values(w.read("out", 0)); !slices.Equal(got, numbered("t", 0, 3)) {
		t.Fatalf("output: %q, want every record once", got)
	}
}
