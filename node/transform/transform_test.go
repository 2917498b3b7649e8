package transform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/plugins"
)

func addPass(t *testing.T, w *world, name string) {
	t.Helper()
	if err := w.mgr.Add(context.Background(), Spec{Name: name, Plugin: "pass", From: "in", To: "out"}); err != nil {
		t.Fatal(err)
	}
}

func numbered(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%04d", prefix, from+i)
	}
	return out
}

// The outputs of input partition p are in output partition p mod n, in
// input order, each once; keys, values, timestamps and headers are the
// ones the plugin answered (here the input's), and the plugin's state
// counted every record once.
//
// covers: G91
func TestPassThroughCopiesEveryRecordOnceInOrder(t *testing.T) {
	w := newWorld(t)
	defer w.mgr.Close()
	w.createTopic("in", 3)
	w.createTopic("out", 2)
	for p := range 3 {
		for b := range 4 {
			w.produce("in", p, numbered(fmt.Sprintf("p%d-", p), b*25, 25)...)
		}
	}
	addPass(t, w, "copy")
	w.waitFor("the transform caught up", w.caughtUp("copy"))
	// Later input flows too.
	w.produce("in", 1, numbered("p1-", 100, 5)...)
	w.waitFor("the transform caught up again", w.caughtUp("copy"))

	want0 := append(numbered("p0-", 0, 100), numbered("p2-", 0, 100)...)
	got0 := values(w.read("out", 0))
	slices.Sort(got0)
	if !slices.Equal(got0, want0) {
		t.Fatalf("output partition 0 holds %d records, want the 200 of input partitions 0 and 2 once each", len(got0))
	}
	if got, want := values(w.read("out", 1)), numbered("p1-", 0, 105); !slices.Equal(got, want) {
		t.Fatalf("output partition 1:\n got %q\nwant %q", got, want)
	}
	r := w.read("out", 1)[3]
	if string(r.Key) != "k-p1-0003" || r.Timestamp != 7 || len(r.Headers) != 1 || string(r.Headers[0].Value) != "p1-0003" {
		t.Fatalf("output record %+v: want the input's key, timestamp and headers", r)
	}
	for p, want := range []uint64{100, 105, 100} {
		if got := w.stateCount("copy", "in", p); got != want {
			t.Errorf("partition %d: the state counted %d records, want %d", p, got, want)
		}
	}
	info, _ := w.mgr.Status("copy")
	if p := info.Partitions[1]; p.RecordsIn != 105 || p.RecordsOut != 105 || p.Committed != 105 || p.Lag != 0 {
		t.Fatalf("status of partition 1: %+v", p)
	}
}

// A crash between the pending write and the append (the batch never
// reached the output) and a crash just after the append (the batch is
// there, nothing was promoted) both end, after a restart, with every
// record in the output once.
//
// covers: G91
func TestRestartAfterEitherSideOfTheAppendIsExactlyOnce(t *testing.T) {
	for _, when := range []string{"before", "after"} {
		t.Run(when, func(t *testing.T) {
			w := newWorld(t)
			w.createTopic("in", 1)
			w.createTopic("out", 1)
			gates := &gatedOutput{}
			w.wrapOut = func(p Partition) Partition { gates.Partition = p; return gates }
			w.produce("in", 0, numbered("a", 0, 10)...)
			if when == "before" {
				gates.failBefore.Store(1 << 20)
			} else {
				gates.failAfter.Store(1 << 20)
			}
			addPass(t, w, "copy")
			w.waitFor("an append failed", func() bool {
				info, _ := w.mgr.Status("copy")
				return len(info.Partitions) == 1 && info.Partitions[0].Errors > 0
			})
			w.mgr.Close() // the crash: nothing more runs
			gates.failBefore.Store(0)
			gates.failAfter.Store(0)
			w.restart()
			defer w.mgr.Close()
			w.produce("in", 0, numbered("a", 10, 10)...)
			w.waitFor("the transform caught up", w.caughtUp("copy"))
			if got, want := values(w.read("out", 0)), numbered("a", 0, 20); !slices.Equal(got, want) {
				t.Fatalf("output:\n got %q\nwant %q", got, want)
			}
			if got := w.stateCount("copy", "in", 0); got != 20 {
				t.Fatalf("the state counted %d records, want 20", got)
			}
		})
	}
}

// A runner that lost its partition while its append was on the way (a
// zombie) has that append refused by the output's owner once the new
// runner took over: the records are in the output once, the new
// runner's.
//
// covers: G92
func TestZombieRunnersLateAppendIsRefused(t *testing.T) {
	w := newWorld(t)
	w.createTopic("in", 1)
	w.createTopic("out", 1)
	w.produce("in", 0, numbered("z", 0, 5)...)
	ctx := context.Background()
	spec := Spec{Name: "copy", Plugin: "pass", From: "in", To: "out", FromID: w.topics["in"].id, ToID: w.topics["out"].id}
	out := w.topics["out"].owners[0]
	runner := func(out Output) *partRunner {
		asg, err := w.groups.Join(ctx, group.JoinRequest{Group: spec.Group(), Member: "m", Topics: []string{"in"}})
		if err != nil || len(asg.Assignment) != 1 {
			t.Fatalf("join: %v, %+v", err, asg)
		}
		return &partRunner{spec: spec, in: w.topics["in"].owners[0], out: out, maxBatch: 1 << 20,
			plugin: w.plugin, producers: w.prods, stats: &partStats{now: nil},
			consumer: owner.Consumer{Name: spec.Group(), Member: asg.MemberID, MemberEpoch: fence.MemberEpoch(asg.Assignment[0].AssignmentEpoch)}}
	}
	gated := &gatedOutput{Partition: out, gate: make(chan struct{}), entered: make(chan struct{})}
	zombie := runner(gated)
	if err := zombie.recover(ctx); err != nil {
		t.Fatal(err)
	}
	zombieDone := make(chan error)
	go func() { zombieDone <- zombie.step(ctx) }()
	<-gated.entered // the zombie wrote its pending step and is about to append

	// The member joins again (a new incarnation): the partition comes
	// back under a new assignment epoch, to a new runner.
	next := runner(out)
	if err := next.recover(ctx); err != nil {
		t.Fatal(err)
	}
	if err := next.step(ctx); err != nil {
		t.Fatal(err)
	}
	close(gated.gate)
	err := <-zombieDone
	if !errors.Is(err, fence.ErrFencedProducer) {
		t.Fatalf("the zombie's append: %v, want %v", err, fence.ErrFencedProducer)
	}
	if err := next.step(ctx); err != nil { // promotes
		t.Fatal(err)
	}
	if got, want := values(w.read("out", 0)), numbered("z", 0, 5); !slices.Equal(got, want) {
		t.Fatalf("output:\n got %q\nwant %q", got, want)
	}
	// And its state write is fenced too.
	if err := zombie.commit(ctx, fence.Token{}, 5, nil, nil); err == nil {
		t.Fatal("the zombie's commit was accepted")
	}
}

// A plugin that fails (a trap, a deadline) leaves the input where it was:
// the status says the plugin's failure as the host said it, and once the
// plugin answers again the transform goes on, every record once.
//
// covers: G93
func TestPluginFailureIsReportedAndDoesNotAdvance(t *testing.T) {
	w := newWorld(t)
	defer w.mgr.Close()
	w.createTopic("in", 1)
	w.createTopic("out", 1)
	w.produce("in", 0, numbered("f", 0, 3)...)
	addPass(t, w, "copy")
	w.waitFor("the transform caught up", w.caughtUp("copy"))
	boom := "boom"
	w.plugin.failOn.Store(&boom)
	w.produce("in", 0, "boom")
	w.produce("in", 0, numbered("f", 3, 3)...)
	w.waitFor("the plugin failed twice", func() bool {
		info, _ := w.mgr.Status("copy")
		return len(info.Partitions) == 1 && info.Partitions[0].PluginFailures >= 2
	})
	info, _ := w.mgr.Status("copy")
	p := info.Partitions[0]
	if p.Committed != 3 || p.Lag != 4 || !strings.Contains(p.LastError, "unreachable") || !errors.Is(errFakeTrap, plugins.ErrTrap) {
		t.Fatalf("status while the plugin traps: %+v", p)
	}
	if got := values(w.read("out", 0)); !slices.Equal(got, numbered("f", 0, 3)) {
		t.Fatalf("output while the plugin traps: %q", got)
	}
	w.plugin.failOn.Store(nil)
	w.waitFor("the transform caught up", w.caughtUp("copy"))
	want := append(append(numbered("f", 0, 3), "boom"), numbered("f", 3, 3)...)
	if got := values(w.read("out", 0)); !slices.Equal(got, want) {
		t.Fatalf("output:\n got %q\nwant %q", got, want)
	}
	if p := mustStatus(t, w, "copy").Partitions[0]; p.LastError != "" || p.RecordsIn != 7 {
		t.Fatalf("status after: %+v", p)
	}
}

func mustStatus(t *testing.T, w *world, name string) Info {
	t.Helper()
	info, err := w.mgr.Status(name)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// Outputs too large for one batch of the output topic are appended in
// steps over part of the input: still every record once, in order.
//
// covers: G91
func TestLargeOutputsSplitTheStep(t *testing.T) {
	w := newWorld(t)
	defer w.mgr.Close()
	w.createTopic("in", 1)
	w.createTopic("out", 1)
	big := strings.Repeat("v", 100<<10)
	var in []string
	for i := range 30 {
		in = append(in, fmt.Sprintf("%02d%s", i, big))
	}
	w.produce("in", 0, in[:15]...)
	w.produce("in", 0, in[15:]...)
	w.plugin.double.Store(true) // 6 MiB of outputs from 3 MiB of input
	addPass(t, w, "copy")
	w.waitFor("the transform caught up", w.caughtUp("copy"))
	got := values(w.read("out", 0))
	if len(got) != 60 {
		t.Fatalf("%d outputs, want 60", len(got))
	}
	for i, v := range got {
		if v != in[i/2] {
			t.Fatalf("output %d is %.2q..., want %.2q...", i, v, in[i/2])
		}
	}
}

// Pause persists: a paused transform stays stopped across a restart until
// resumed, and Remove forgets it and its group's progress.
func TestPauseResumeRemove(t *testing.T) {
	w := newWorld(t)
	w.createTopic("in", 1)
	w.createTopic("out", 1)
	w.produce("in", 0, numbered("r", 0, 4)...)
	ctx := context.Background()
	addPass(t, w, "copy")
	w.waitFor("the transform caught up", w.caughtUp("copy"))
	if err := w.mgr.Pause(ctx, "copy"); err != nil {
		t.Fatal(err)
	}
	w.produce("in", 0, numbered("r", 4, 4)...)
	w.restart()
	defer func() { w.mgr.Close() }()
	if info := mustStatus(t, w, "copy"); !info.Spec.Paused || len(info.Partitions) != 1 ||
		info.Partitions[0].Committed != 4 || info.Partitions[0].Lag != 4 || info.Partitions[0].Running {
		t.Fatalf("after a restart: %+v, want paused at 4 with a lag of 4", info)
	}
	if got := len(w.read("out", 0)); got != 4 {
		t.Fatalf("a paused transform appended: %d records", got)
	}
	if err := w.mgr.Resume(ctx, "copy"); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the transform caught up", w.caughtUp("copy"))
	if got := values(w.read("out", 0)); !slices.Equal(got, numbered("r", 0, 8)) {
		t.Fatalf("output: %q", got)
	}
	if err := w.mgr.Add(ctx, Spec{Name: "copy", Plugin: "pass", From: "in", To: "out"}); !errors.Is(err, ErrExists) {
		t.Fatalf("adding it again: %v, want %v", err, ErrExists)
	}
	if err := w.mgr.Remove(ctx, "copy"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.mgr.Status("copy"); !errors.Is(err, ErrNoTransform) {
		t.Fatalf("status after remove: %v", err)
	}
	if got := w.stateCount("copy", "in", 0); got != 0 {
		t.Fatalf("the removed transform's state is still there: %d", got)
	}
}

func TestAddRefusesBadSpecs(t *testing.T) {
	w := newWorld(t)
	defer w.mgr.Close()
	w.createTopic("in", 1)
	ctx := context.Background()
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "a b", Plugin: "p", From: "in", To: "out"}, "name"},
		{Spec{Name: "a", From: "in", To: "out"}, "no plugin"},
		{Spec{Name: "a", Plugin: "p", From: "in", To: "in"}, "both the input and the output"},
		{Spec{Name: "a", Plugin: "p", From: "in", To: "nope"}, `output topic "nope"`},
		{Spec{Name: "a", Plugin: "p", From: "in", To: "out", Params: map[string]string{"": "x"}}, "param"},
	} {
		err := w.mgr.Add(ctx, c.spec)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Add(%+v): %v, want ErrConfig saying %q", c.spec, err, c.want)
		}
	}
}

// A purge of the input while the transform is paused: it resumes at the
// new start, with the records appended after the purge.
func TestPurgedInputResumesAtTheNewStart(t *testing.T) {
	w := newWorld(t)
	defer func() { w.mgr.Close() }()
	w.createTopic("in", 1)
	w.createTopic("out", 1)
	ctx := context.Background()
	w.produce("in", 0, numbered("a", 0, 3)...)
	addPass(t, w, "copy")
	w.waitFor("the transform caught up", w.caughtUp("copy"))
	if err := w.mgr.Pause(ctx, "copy"); err != nil {
		t.Fatal(err)
	}
	w.produce("in", 0, numbered("gone", 0, 2)...)
	if _, err := w.topics["in"].owners[0].Purge(ctx); err != nil {
		t.Fatal(err)
	}
	w.produce("in", 0, numbered("b", 0, 2)...)
	if err := w.mgr.Resume(ctx, "copy"); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the transform caught up", w.caughtUp("copy"))
	want := append(numbered("a", 0, 3), numbered("b", 0, 2)...)
	if got := values(w.read("out", 0)); !slices.Equal(got, want) {
		t.Fatalf("output:\n got %q\nwant %q", got, want)
	}
}
