package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// dayPlugin is a filter plugin in use all day: a named consumer of the
// "readings" topic keeps one site's records through the jsonfilter plugin
// on the node, across the node's restarts.
type dayPlugin struct {
	mu   sync.Mutex
	seen map[string]bool
	bad  []string // records the filter should have dropped
}

// setUp adds the plugin and a topic its producer writes JSON to.
func (d *dayPlugin) setUp(ctx context.Context, t *testing.T, c *sdk.Client) {
	t.Helper()
	d.seen = map[string]bool{}
	if _, err := c.AddPlugin(ctx, "site", sdk.PluginFilter, buildPlugin(t, jsonFilterPkg)); err != nil {
		t.Fatal(err)
	}
}

// value is the JSON of the i-th reading: even ones from lyon, odd ones
// from oslo.
func (d *dayPlugin) value(i int) []byte {
	return fmt.Appendf(nil, `{"site":%q,"n":%d}`, []string{"lyon", "oslo"}[i%2], i)
}

func (d *dayPlugin) consume(ctx context.Context, t *testing.T, c *sdk.Client) {
	cons, err := c.NewConsumer(ctx, "readings", sdk.WithConsumerName("lyon"), sdk.WithStart(sdk.AtFirst()),
		sdk.WithAutoCommit(sdk.AutoCommitOnNextPoll), sdk.WithMaxWait(300*time.Millisecond),
		sdk.WithFilter("site", map[string]string{"field": "site", "equals": "lyon"}))
	if err != nil {
		t.Errorf("filtered consumer: %v", err)
		return
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), safety)
		defer cancel()
		_ = cons.Close(closeCtx)
	}()
	d.follow(ctx, cons, false)
}

// follow polls until ctx ends, or with untilEnd until a poll finds nothing.
func (d *dayPlugin) follow(ctx context.Context, cons *sdk.Consumer, untilEnd bool) {
	for ctx.Err() == nil {
		recs, err := cons.Poll(ctx)
		if err != nil && len(recs) == 0 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		d.mu.Lock()
		for _, r := range recs {
			if !strings.Contains(string(r.Value), `"lyon"`) {
				d.bad = append(d.bad, string(r.Value))
			}
			d.seen[string(r.Value)] = true
		}
		d.mu.Unlock()
		if untilEnd && len(recs) == 0 && err == nil {
			return
		}
	}
}

// check catches the filtered consumer up and finds every acknowledged
// lyon reading, and no other.
func (d *dayPlugin) check(ctx context.Context, t *testing.T, c *sdk.Client, p *dayProducer) {
	t.Helper()
	cons, err := c.NewConsumer(ctx, "readings", sdk.WithConsumerName("lyon"), sdk.WithStart(sdk.AtCommitted()),
		sdk.WithAutoCommit(sdk.AutoCommitOnNextPoll), sdk.WithMaxWait(0),
		sdk.WithFilter("site", map[string]string{"field": "site", "equals": "lyon"}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	d.follow(ctx, cons, true)
	p.mu.Lock()
	defer p.mu.Unlock()
	missed := 0
	for v := range p.acked {
		if strings.Contains(v, `"lyon"`) && !d.seen[v] {
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("the filtered consumer never saw %d acknowledged lyon readings", missed)
	}
	if len(d.bad) > 0 {
		t.Errorf("the filter let %d other readings through, e.g. %s", len(d.bad), d.bad[0])
	}
}

// dayKafka is a Kafka cluster (kfake) a topic is forwarded to, whose
// connectivity the test cuts and restores: while cut, every request closes
// its connection.
type dayKafka struct {
	cluster *kfake.Cluster
	cut     atomic.Bool
	cuts    int
}

const dayKafkaTopic = "edge-always"

func newDayKafka(t *testing.T, partitions int32) *dayKafka {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, dayKafkaTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	k := &dayKafka{cluster: c}
	c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if k.cut.Load() {
			return nil, errors.New("connectivity cut"), true
		}
		return nil, nil, false
	})
	return k
}

// toggle cuts the connectivity, or restores it.
func (k *dayKafka) toggle() {
	if !k.cut.Load() {
		k.cuts++
	}
	k.cut.Store(!k.cut.Load())
}

// check waits for the uplink of topic to forward everything, then finds
// every record of the topic's log in Kafka exactly once, in its partition
// and order.
func (k *dayKafka) check(ctx context.Context, t *testing.T, c *sdk.Client, topic string) {
	t.Helper()
	k.cut.Store(false)
	for deadline := time.Now().Add(safety); ; time.Sleep(100 * time.Millisecond) {
		u, err := c.UplinkStatus(ctx, topic)
		caughtUp := err == nil && len(u.Partitions) > 0
		for _, p := range u.Partitions {
			caughtUp = caughtUp && p.LagRecords == 0
		}
		if caughtUp {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the uplink of %s did not catch up: %+v %v", topic, u, err)
		}
	}
	want := map[int32][]string{}
	total := 0
	for _, r := range readAll(ctx, t, c, topic) {
		want[r.Partition] = append(want[r.Partition], string(r.Value))
		total++
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.cluster.ListenAddrs()...), kgo.ConsumeTopics(dayKafkaTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[int32][]string{}
	n := 0
	fetchCtx, cancel := context.WithTimeout(ctx, safety)
	defer cancel()
	for n < total && fetchCtx.Err() == nil {
		cl.PollFetches(fetchCtx).EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	for p, vs := range want {
		if strings.Join(got[p], ",") != strings.Join(vs, ",") {
			t.Errorf("Kafka partition %d holds %d records, the log %d: not exactly once, in order", p, len(got[p]), len(vs))
		}
	}
	if n != total {
		t.Errorf("Kafka holds %d records, the log %d", n, total)
	}
}

// dayDisk is a small file system of its own (a tmpfs, mounted as root)
// holding the data directory, that the test fills with a ballast file and
// frees again.
type dayDisk struct {
	dir            string
	fills          int
	ackedWhileFull int
}

// newDayDisk mounts a tmpfs of size bytes, or returns nil (and says why)
// where the test cannot mount.
func newDayDisk(t *testing.T, size int64) *dayDisk {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not root: the full-disk part of the day is left out")
		return nil
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Logf("cannot mount a tmpfs (%v: %s): the full-disk part of the day is left out", err, strings.TrimSpace(string(out)))
		return nil
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return &dayDisk{dir: dir}
}

// fill writes a ballast file until the file system is full.
func (d *dayDisk) fill(t *testing.T) {
	t.Helper()
	d.fills++
	f, err := os.Create(filepath.Join(d.dir, "ballast"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			return
		}
	}
}

// free removes the ballast.
func (d *dayDisk) free(t *testing.T) {
	t.Helper()
	if err := os.Remove(filepath.Join(d.dir, "ballast")); err != nil {
		t.Fatal(err)
	}
}
