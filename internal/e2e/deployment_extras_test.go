package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

var dayDiskKind = flag.String("day.disk", "auto",
	"the full disk of TestDeploymentDay: tmpfs (mounted as root), fullfs (the node's file system limited through "+testDiskEnv+"), or auto (tmpfs where it can mount one)")

// testDiskEnv is the variable that puts `ledge serve` on a disk of limited
// size (internal/fullfs) named by a control file (cmd/ledge/testdisk.go).
const testDiskEnv = "LEDGE_TEST_DISK"

// dayDisk is the node's disk, of a limited size, that the test fills and
// frees: a tmpfs of its own holding the data directory (mounted as root),
// filled with a ballast file; or, where the test cannot mount, the node's
// file system limited to the size through testDiskEnv, whose control file
// says "full" to fill it.
type dayDisk struct {
	dir            string // where the data directory goes
	size           int64
	control        string // the testDiskEnv control file; "" on a tmpfs
	fills          int
	ackedWhileFull int
}

// newDayDisk makes a disk of size bytes as -day.disk says.
func newDayDisk(t *testing.T, size int64) *dayDisk {
	t.Helper()
	switch *dayDiskKind {
	case "auto", "tmpfs":
		if d, why := mountDayDisk(t, size); d != nil {
			return d
		} else if *dayDiskKind == "tmpfs" {
			t.Fatalf("-day.disk tmpfs: %s", why)
		} else {
			t.Logf("%s: the node's file system is limited through %s instead", why, testDiskEnv)
		}
	case "fullfs":
	default:
		t.Fatalf("-day.disk %q: want tmpfs, fullfs or auto", *dayDiskKind)
	}
	return newLimitedDisk(t, size)
}

// newLimitedDisk returns a disk of size bytes that is the node's own file
// system limited through testDiskEnv.
func newLimitedDisk(t *testing.T, size int64) *dayDisk {
	t.Helper()
	d := &dayDisk{dir: t.TempDir(), size: size, control: filepath.Join(t.TempDir(), "disk")}
	d.writeControl(t, strconv.FormatInt(size, 10))
	return d
}

// mountDayDisk mounts a tmpfs of size bytes, or says why it cannot.
func mountDayDisk(t *testing.T, size int64) (*dayDisk, string) {
	if os.Geteuid() != 0 {
		return nil, "not root: cannot mount a tmpfs"
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		return nil, fmt.Sprintf("cannot mount a tmpfs (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return &dayDisk{dir: dir, size: size}, ""
}

// kind says which disk this is, for the report.
func (d *dayDisk) kind() string {
	if d.control != "" {
		return "the node's file system limited through " + testDiskEnv
	}
	return "a tmpfs"
}

// env is what the node's environment needs to run on the disk.
func (d *dayDisk) env() []string {
	if d.control == "" {
		return nil
	}
	return []string{testDiskEnv + "=" + d.control}
}

// writeControl replaces the control file's content at once (a rename), so
// that the node never reads half of it.
func (d *dayDisk) writeControl(t *testing.T, text string) {
	t.Helper()
	tmp := d.control + ".tmp"
	if err := os.WriteFile(tmp, []byte(text+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, d.control); err != nil {
		t.Fatal(err)
	}
}

// resize sets the limited disk's size and waits for the node to say it
// took it.
func (d *dayDisk) resize(t *testing.T, node *servedLedge, text string) {
	t.Helper()
	const taken = "test disk resized"
	before := strings.Count(node.logs.String(), taken)
	d.writeControl(t, text)
	for deadline := time.Now().Add(safety); strings.Count(node.logs.String(), taken) == before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the node never took the disk's size %s:\n%s", text, node.logs.Tail(10))
		}
	}
}

// fill leaves the disk no room: a ballast file on a tmpfs takes what is
// left; the limited disk shrinks to what is used.
func (d *dayDisk) fill(t *testing.T, node *servedLedge) {
	t.Helper()
	d.fills++
	if d.control != "" {
		d.resize(t, node, "full")
		return
	}
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

// free gives the disk its room back.
func (d *dayDisk) free(t *testing.T, node *servedLedge) {
	t.Helper()
	if d.control != "" {
		d.resize(t, node, strconv.FormatInt(d.size, 10))
		return
	}
	if err := os.Remove(filepath.Join(d.dir, "ballast")); err != nil {
		t.Fatal(err)
	}
}
