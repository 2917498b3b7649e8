package node

import (
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/node/ops/opstest"
	"reflect"
	"testing"

	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
)

// listedLog is a ownertest.Log whose bookmarks can be listed, as the engine's.
type listedLog struct {
	*ownertest.Log
	marks map[string]owner.Bookmark
}

func (l listedLog) Bookmarks(fn func(string, owner.Bookmark) error) error {
	for _, k := range []string{"c/billing", "g/shipping", "x/other", "c/audit"} {
		if b, ok := l.marks[k]; ok {
			if err := fn(k, b); err != nil {
				return err
			}
		}
	}
	return nil
}

func TestConsumersOfResolveBookmarksInTheCurrentHistory(t *testing.T) {
	l := listedLog{Log: ownertest.NewLog(ownertest.NewMeta(), "t/0"), marks: map[string]owner.Bookmark{}}
	if _, _, err := l.Append(batch(t, 0, 0, 0, "a", "b", "c", "d", "e", "f")); err != nil {
		t.Fatal(err)
	}
	l.marks["c/billing"] = owner.Bookmark{Offset: 4, History: 1}
	l.marks["x/other"] = owner.Bookmark{Offset: 1, History: 1} // not a consumer's key
	got := consumersOf(l, l.State())
	if len(got) != 1 || got[0].Name != "billing" || got[0].Kind != "consumer" || got[0].Position != 4 || got[0].Lag != 2 {
		t.Fatalf("before purge: %+v", got)
	}

	// Purge: the bookmark of history 1 resumes at the new start; then two
	// more records arrive.
	if _, err := l.Purge(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Append(batch(t, 0, 0, 0, "g", "h")); err != nil {
		t.Fatal(err)
	}
	l.marks["g/shipping"] = owner.Bookmark{Offset: 7, History: 2}
	got = consumersOf(l, l.State())
	want := []ops.ConsumerSnapshot{
		{Name: "billing", Kind: "consumer", Committed: owner.Bookmark{Offset: 4, History: 1}, Position: 6, Lag: 2},
		{Name: "shipping", Kind: "group", Committed: owner.Bookmark{Offset: 7, History: 2}, Position: 7, Lag: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after purge:\n got %+v\nwant %+v", got, want)
	}

	// Retention raised the start past a bookmark of the current history:
	// the consumer resumes at the start.
	l.RetainFrom(7)
	l.marks["c/audit"] = owner.Bookmark{Offset: 6, History: 2}
	for _, c := range consumersOf(l, l.State()) {
		if c.Name == "audit" && (c.Position != 7 || c.Lag != 1) {
			t.Errorf("below the log start: %+v", c)
		}
	}
}

// fakePlugins is a plugin host with one healthy and one quarantined plugin.
type fakePlugins struct{}

func (fakePlugins) PluginStatuses() []ops.PluginStatus {
	return []ops.PluginStatus{
		{Name: "only-errors", Kind: "filter", Calls: 120, State: "ok"},
		{Name: "greedy", Kind: "commit-policy", Calls: 9, Failures: 3, Timeouts: 2, Traps: 1, Strikes: 3, State: "quarantined"},
	}
}

func TestPluginsOnTheStatusPageAndMetrics(t *testing.T) {
	ops := newOpsServer(t, ops.HTTPConfig{})
	tn := startNode(t, newMemStorage(), nil)
	ops.Attach(tn.Node)
	ops.AttachPlugins(fakePlugins{})
	st := ops.status(t)
	if len(st.Plugins) != 2 || st.Plugins[1].State != "quarantined" || st.Plugins[1].Timeouts != 2 {
		t.Errorf("plugins: %+v", st.Plugins)
	}
	m := ops.Metrics()
	for _, tc := range []struct {
		name string
		want float64
	}{
		{"ledge_plugin_calls_total", 9}, {"ledge_plugin_failures_total", 3}, {"ledge_plugin_timeouts_total", 2},
		{"ledge_plugin_traps_total", 1}, {"ledge_plugin_strikes", 3}, {"ledge_plugin_quarantined", 1},
	} {
		if got := opstest.MustMetric(t, m.Registry(), tc.name, "plugin", "greedy", "kind", "commit-policy"); got != tc.want {
			t.Errorf("%s = %v; want %v", tc.name, got, tc.want)
		}
	}
	ops.Stopping()
	if st := ops.status(t); len(st.Plugins) != 0 {
		t.Errorf("plugins read after Stopping: %+v", st.Plugins)
	}
}
