package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

var dayDuration = flag.Duration("day.duration", 4*time.Second,
	"how long TestDeploymentDay drives the node (e.g. -day.duration 30m)")

// TestDeploymentDay drives the real binary as a deployment lives a day:
// idempotent producers on a durability-always and a durability-none topic,
// a group whose members keep a fenced state (a count per key), a named
// follower; meanwhile the node is stopped with SIGTERM and killed with
// SIGKILL and restarted, clients vanish without closing (killed CLI
// consumers, a named follower and a group member), and its disk fills
// and is freed (a tmpfs where the test can mount one, else the node's own
// file system limited in size: -day.disk). Every SIGTERM stop must exit
// with status 0 without waiting out the shutdown deadline. At the end: no
// acknowledged record lost or duplicated, the group's committed offsets
// never behind a commit it acknowledged, its state equal to the exact
// fold of the records below its offset, the follower saw everything, and
// the node never panicked. It reports the restart-to-ready, client resume
// and shutdown times.
func TestDeploymentDay(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	bin := buildLedge(t)
	disk := newDayDisk(t, 1<<30)
	node := newServedLedge(t, bin, filepath.Join(disk.dir, "ledge-data"))
	node.env = disk.env()
	node.start()
	defer node.checkNoPanic()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := node.dial(ctx)
	defer c.Close()
	for _, topic := range []string{"always", "none"} {
		d := sdk.DurabilityAlways
		if topic == "none" {
			d = sdk.DurabilityNone
		}
		if _, err := c.CreateTopic(ctx, topic, sdk.TopicConfig{Partitions: 3, Durability: d}); err != nil {
			t.Fatal(err)
		}
	}

	// A filter plugin in use on a topic of its own, and an uplink of the
	// "always" topic to a Kafka cluster whose connectivity is cut and
	// restored.
	plugin := &dayPlugin{}
	plugin.setUp(ctx, t, c)
	if _, err := c.CreateTopic(ctx, "readings", sdk.TopicConfig{Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	kafka := newDayKafka(t, 3)
	if err := c.AddUplink(ctx, "always", sdk.UplinkConfig{Seeds: kafka.cluster.ListenAddrs(), To: dayKafkaTopic}); err != nil {
		t.Fatal(err)
	}

	load, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	producers := map[string]*dayProducer{}
	for _, topic := range []string{"always", "none", "readings"} {
		p := &dayProducer{topic: topic, acked: map[string]sdk.Record{}}
		if topic == "readings" {
			p.value = plugin.value
		}
		producers[topic] = p
		wg.Go(func() { p.run(load, t, c) })
	}
	wg.Go(func() { plugin.consume(load, t, c) })
	group := &dayGroup{name: "fold", topic: "always", committed: map[int32]uint64{}}
	for i := range 2 {
		wg.Go(func() { group.member(load, t, c, fmt.Sprintf("member-%d", i)) })
	}
	follower := &dayFollower{seen: map[string]bool{}}
	wg.Go(func() { follower.run(load, t, c, "none") })

	// The day: load, then an event, until the duration is spent (at
	// least two SIGTERM restarts, one SIGKILL restart and a full disk).
	resume := map[syscall.Signal][]time.Duration{}
	var spaceResume []time.Duration
	// An event every sixth of the day, and at least every 50 s: a long
	// day is many restarts, not longer quiet spells.
	period := min(max(*dayDuration/6, 700*time.Millisecond), 50*time.Second)
	deadline := time.Now().Add(*dayDuration)
	for i := 0; i < 3 || time.Now().Before(deadline); i++ {
		time.Sleep(period)
		if i%3 == 2 {
			// The disk fills: appends are refused (retryably) while it
			// is full; freeing it lets the producers through again.
			disk.fill(t, node)
			before := producers["always"].ackCount()
			time.Sleep(min(period, 2*time.Second))
			disk.ackedWhileFull += producers["always"].ackCount() - before
			disk.free(t, node)
			freed := time.Now()
			if d, ok := producers["always"].nextAckAfter(freed, 10*time.Second); ok {
				spaceResume = append(spaceResume, d)
			} else {
				t.Errorf("no acknowledgement within 10 s of the disk being freed")
			}
		}
		kafka.toggle()
		sig := syscall.SIGTERM
		if i%2 == 1 {
			sig = syscall.SIGKILL
		} else {
			vanishClients(t, node, i)
		}
		node.stop(sig)
		ready := node.start()
		if d, ok := producers["always"].nextAckAfter(ready, 10*time.Second); ok {
			resume[sig] = append(resume[sig], d)
		} else {
			t.Errorf("restart %d (%v): no acknowledgement within 10 s of the node being ready", i, sig)
		}
		group.checkOffsets(ctx, t, c)
	}
	time.Sleep(period)
	stopLoad()
	wg.Wait()

	// The last stop is graceful; what follows reads the node back.
	node.stop(syscall.SIGTERM)
	node.start()
	for _, topic := range []string{"always", "none", "readings"} {
		producers[topic].check(ctx, t, c)
	}
	plugin.check(ctx, t, c, producers["readings"])
	kafka.check(ctx, t, c, "always")
	group.checkOffsets(ctx, t, c)
	group.checkFold(ctx, t, c)
	follower.check(ctx, t, c, producers["none"])
	node.stop(syscall.SIGTERM)

	t.Logf("restart to ready (exec to /readyz 200): %s", median(node.readyTimes))
	t.Logf("producer resume (ready to next acknowledgement) after SIGTERM: %s", median(resume[syscall.SIGTERM]))
	t.Logf("producer resume (ready to next acknowledgement) after SIGKILL: %s", median(resume[syscall.SIGKILL]))
	t.Logf("shutdown (SIGTERM to exit): %s", median(node.shutdownTimes))
	t.Logf("full disk (%s): filled %d times, %d records of the always topic acknowledged while full; space freed to next acknowledgement: %s",
		disk.kind(), disk.fills, disk.ackedWhileFull, median(spaceResume))
	for _, topic := range []string{"always", "none", "readings"} {
		p := producers[topic]
		t.Logf("topic %s: %d records acknowledged, %d of unknown outcome", topic, len(p.acked), p.unknown.Load())
	}
	t.Logf("group %s: %d records folded, %d state commits", group.name, group.folded.Load(), group.commits.Load())
	t.Logf("uplink: Kafka's connectivity cut %d times", kafka.cuts)
}

// vanishClients starts CLI clients — a named follower, a group member —
// and kills them (SIGKILL) once they are attached: their connections are
// left to the node to notice.
func vanishClients(t *testing.T, node *servedLedge, round int) {
	t.Helper()
	cmds := []*exec.Cmd{
		node.client("consume", "always", "--consumer", "vanishing-"+strconv.Itoa(round), "--follow", "--from", "latest"),
		node.client("consume", "always", "--group", "vanishing", "--follow"),
	}
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // attached and parked
	for _, cmd := range cmds {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// dayProducer produces to one topic until its context ends, keeping what
// was acknowledged (value -> partition and offset).
type dayProducer struct {
	topic   string
	value   func(i int) []byte // default: topic-i
	unknown atomic.Int64

	mu    sync.Mutex
	acked map[string]sdk.Record
	times []time.Time // acknowledgement times, in order
	maybe map[string]bool
}

func (p *dayProducer) run(ctx context.Context, t *testing.T, c *sdk.Client) {
	prod, err := c.NewProducer(ctx, p.topic)
	if err != nil {
		t.Error(err)
		return
	}
	p.maybe = map[string]bool{}
	for i := 0; ctx.Err() == nil; i++ {
		val := fmt.Appendf(nil, "%s-%07d", p.topic, i)
		if p.value != nil {
			val = p.value(i)
		}
		v := string(val)
		rec := &sdk.Record{Key: []byte(strconv.Itoa(i % 7)), Value: val}
		prod.Produce(context.WithoutCancel(ctx), rec, func(r *sdk.Record, err error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			switch {
			case err == nil:
				p.acked[v] = sdk.Record{Partition: r.Partition, Offset: r.Offset}
				p.times = append(p.times, time.Now())
			case errors.Is(err, sdk.ErrUnknownOutcome):
				p.unknown.Add(1)
				p.maybe[v] = true
			default:
				t.Errorf("produce %s: %v", v, err)
			}
		})
		if i%20 == 19 {
			time.Sleep(40 * time.Millisecond) // about 500 records a second
		}
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	if err := prod.Close(closeCtx); err != nil {
		t.Errorf("closing the %s producer: %v", p.topic, err)
	}
}

func (p *dayProducer) ackCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.times)
}

// nextAckAfter waits for the first acknowledgement after at and returns
// how long after at it came.
func (p *dayProducer) nextAckAfter(at time.Time, limit time.Duration) (time.Duration, bool) {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		p.mu.Lock()
		for i := len(p.times) - 1; i >= 0 && p.times[i].After(at); i-- {
			if i == 0 || !p.times[i-1].After(at) {
				d := p.times[i].Sub(at)
				p.mu.Unlock()
				return d, true
			}
		}
		p.mu.Unlock()
	}
	return 0, false
}

// check reads the topic back: every acknowledged record once, at its
// acknowledged offset; records of unknown outcome at most once; nothing
// else.
func (p *dayProducer) check(ctx context.Context, t *testing.T, c *sdk.Client) {
	t.Helper()
	all := readAll(ctx, t, c, p.topic)
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]int{}
	for _, r := range all {
		v := string(r.Value)
		seen[v]++
		if a, ok := p.acked[v]; ok && (a.Partition != r.Partition || a.Offset != r.Offset) {
			t.Errorf("%s: %s acknowledged at %d/%d, found at %d/%d", p.topic, v, a.Partition, a.Offset, r.Partition, r.Offset)
		}
		if _, ok := p.acked[v]; !ok && !p.maybe[v] {
			t.Errorf("%s: %s was never produced or failed, yet is there", p.topic, v)
		}
	}
	lost := 0
	for v := range p.acked {
		if seen[v] == 0 {
			lost++
		}
	}
	for v, n := range seen {
		if n > 1 {
			t.Errorf("%s: %s is there %d times", p.topic, v, n)
		}
	}
	if lost > 0 {
		t.Errorf("%s: %d acknowledged records lost", p.topic, lost)
	}
}

// readAll reads a topic from the start to its end.
func readAll(ctx context.Context, t *testing.T, c *sdk.Client, topic string) []*sdk.Record {
	t.Helper()
	cons, err := c.NewConsumer(ctx, topic, sdk.WithStart(sdk.AtFirst()), sdk.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	var out []*sdk.Record
	for empty := 0; empty < 3; {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatalf("reading %s back: %v", topic, err)
		}
		if len(recs) == 0 {
			empty++
		}
		out = append(out, recs...)
	}
	return out
}
