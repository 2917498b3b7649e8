package node

import (
	"reflect"
	"testing"

	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/transport/wire"
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
	if len(got) != 1 || got[0].name != "billing" || got[0].kind != "consumer" || got[0].position != 4 || got[0].lag != 2 {
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
	want := []consumerSnapshot{
		{name: "billing", kind: "consumer", committed: owner.Bookmark{Offset: 4, History: 1}, position: 6, lag: 2},
		{name: "shipping", kind: "group", committed: owner.Bookmark{Offset: 7, History: 2}, position: 7, lag: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after purge:\n got %+v\nwant %+v", got, want)
	}

	// Retention raised the start past a bookmark of the current history:
	// the consumer resumes at the start.
	l.RetainFrom(7)
	l.marks["c/audit"] = owner.Bookmark{Offset: 6, History: 2}
	for _, c := range consumersOf(l, l.State()) {
		if c.name == "audit" && (c.position != 7 || c.lag != 1) {
			t.Errorf("below the log start: %+v", c)
		}
	}
}

// fakeGroups is a coordinator with one group of two members.
type fakeGroups struct{}

func (fakeGroups) List() []wire.GroupSummary {
	return []wire.GroupSummary{{Group: "shipping", State: wire.GroupStable, GroupEpoch: 7, Members: 2, Topics: []string{"orders", "returns"}}}
}

func (fakeGroups) Describe(name string) wire.DescribeGroupReply {
	return wire.DescribeGroupReply{Group: name, State: wire.GroupStable, GroupEpoch: 7, Members: []wire.GroupMember{
		{MemberID: "m1", MemberEpoch: 7, Assignment: []wire.AssignedPartition{{Topic: "orders", Partition: 0, AssignmentEpoch: 5}}},
		{MemberID: "m2", MemberEpoch: 7, ClientID: "sensor-7", Host: "192.0.2.7", Assignment: []wire.AssignedPartition{{Topic: "orders", Partition: 1, AssignmentEpoch: 7}}},
	}}
}

func TestAddGroups(t *testing.T) {
	in := []ConsumerStatus{
		{Name: "billing", Kind: "consumer", Topic: "orders", Partitions: []ConsumerPartition{{Partition: 0}}},
		{Name: "shipping", Kind: "group", Topic: "orders", Lag: 3, Partitions: []ConsumerPartition{{Partition: 0, Lag: 1}, {Partition: 1, Lag: 2}}},
	}
	out := addGroups(fakeGroups{}, in)
	if len(out) != 3 {
		t.Fatalf("%d consumers: %+v", len(out), out)
	}
	if out[0].Members != nil || out[0].State != "" {
		t.Errorf("a named consumer got group fields: %+v", out[0])
	}
	g := out[1]
	if g.State != wire.GroupStable.String() || g.Epoch != 7 || len(g.Members) != 2 ||
		g.Partitions[0].Member != "m1" || g.Partitions[1].Member != "m2" ||
		!reflect.DeepEqual(g.Members[1], MemberStatus{ID: "m2", ClientID: "sensor-7", Host: "192.0.2.7", Epoch: 7, Assignments: []string{"orders/1"}}) {
		t.Errorf("group on orders: %+v", g)
	}
	// The group has not committed on "returns": it shows, without lag.
	if r := out[2]; r.Name != "shipping" || r.Topic != "returns" || r.Lag != 0 || len(r.Members) != 2 {
		t.Errorf("group on returns: %+v", r)
	}
	if got := addGroups(nil, in); len(got) != 2 {
		t.Errorf("no coordinator: %+v", got)
	}
}

// fakePlugins is a plugin host with one healthy and one quarantined plugin.
type fakePlugins struct{}

func (fakePlugins) PluginStatuses() []PluginStatus {
	return []PluginStatus{
		{Name: "only-errors", Kind: "filter", Calls: 120, State: "ok"},
		{Name: "greedy", Kind: "commit-policy", Calls: 9, Failures: 3, Timeouts: 2, Traps: 1, Strikes: 3, State: "quarantined"},
	}
}

func TestPluginsOnTheStatusPageAndMetrics(t *testing.T) {
	ops := newOpsServer(t, HTTPConfig{})
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
		if got := mustMetric(t, m, tc.name, "plugin", "greedy", "kind", "commit-policy"); got != tc.want {
			t.Errorf("%s = %v; want %v", tc.name, got, tc.want)
		}
	}
	ops.Stopping()
	if st := ops.status(t); len(st.Plugins) != 0 {
		t.Errorf("plugins read after Stopping: %+v", st.Plugins)
	}
}
