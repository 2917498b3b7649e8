package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
	"github.com/twmb/franz-go/pkg/kgo"
)

// readingFleet is devices that produce readings, each on a connection of
// its own, with an idempotent SDK producer and its name as the records'
// key: "sensor-3:0042" is the 43rd reading of sensor-3. A device produces
// its readings below the fleet's released count, one every pace, and
// keeps what the node acknowledged, in the order it did.
type readingFleet struct {
	per  int           // readings of each device
	pace time.Duration // between two readings of a device

	mu       sync.Mutex
	cond     *sync.Cond
	released int
	acked    map[string][]int // device → its acknowledged readings' numbers
	unknown  map[string][]int // device → readings of unknown outcome
	failed   []string         // readings that failed for another reason
	closeErr []error
	wg       sync.WaitGroup
}

// startReadingFleet connects devices to node and starts them, with
// nothing released yet. Their names spread over two partitions: sensor-0,
// 3 and 4 hash to partition 0, sensor-1, 2 and 5 to partition 1.
func startReadingFleet(ctx context.Context, t *testing.T, node *servedLedge, topic string, devices, per int, pace time.Duration) *readingFleet {
	t.Helper()
	f := &readingFleet{per: per, pace: pace, acked: map[string][]int{}, unknown: map[string][]int{}}
	f.cond = sync.NewCond(&f.mu)
	for d := range devices {
		name := fmt.Sprintf("sensor-%d", d)
		c := node.dial(ctx)
		t.Cleanup(func() { _ = c.Close() })
		p, err := c.NewProducer(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		f.wg.Go(func() { f.run(ctx, name, p) })
	}
	return f
}

// release lets every device produce its readings below n.
func (f *readingFleet) release(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = n
	f.cond.Broadcast()
}

func (f *readingFleet) run(ctx context.Context, name string, p *sdk.Producer) {
	for i := range f.per {
		f.mu.Lock()
		for i >= f.released {
			f.cond.Wait()
		}
		f.mu.Unlock()
		rec := &sdk.Record{Key: []byte(name), Value: fmt.Appendf(nil, "%s:%04d", name, i)}
		p.Produce(ctx, rec, func(_ *sdk.Record, err error) { f.note(name, i, err) })
		time.Sleep(f.pace)
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	if err := p.Close(closeCtx); err != nil {
		f.mu.Lock()
		f.closeErr = append(f.closeErr, fmt.Errorf("%s: closing its producer: %w", name, err))
		f.mu.Unlock()
	}
}

func (f *readingFleet) note(name string, i int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err == nil:
		f.acked[name] = append(f.acked[name], i)
	case errors.Is(err, sdk.ErrUnknownOutcome):
		f.unknown[name] = append(f.unknown[name], i)
	default:
		f.failed = append(f.failed, fmt.Sprintf("%s:%04d: %v", name, i, err))
	}
}

// ackCount is how many readings the node acknowledged so far.
func (f *readingFleet) ackCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, a := range f.acked {
		n += len(a)
	}
	return n
}

// wait waits for every device to have produced everything and closed its
// producer, and fails the test for any reading the node did not
// acknowledge: the producers retry through the node's restarts, so
// every reading must be acknowledged once.
func (f *readingFleet) wait(t *testing.T) {
	t.Helper()
	f.release(f.per)
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, err := range f.closeErr {
		t.Error(err)
	}
	for _, s := range f.failed {
		t.Errorf("a reading failed: %s", s)
	}
	for name, is := range f.unknown {
		t.Errorf("%s: %d readings of unknown outcome (the producer could not learn whether they were written), e.g. %d", name, len(is), is[0])
	}
	for name, is := range f.acked {
		for j, i := range is {
			if i != j {
				t.Errorf("%s: acknowledgement %d is for reading %d: a reading acknowledged twice, or out of order", name, j, i)
				break
			}
		}
	}
}

// checkKafka reads the Kafka topic (read_committed) and finds there every
// acknowledged reading exactly once, as the map transform made it (the
// value upper cased, the key kept), each device's readings in the order
// it produced them, and nothing else.
func (f *readingFleet) checkKafka(t *testing.T, seeds []string, topic string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	want := 0
	for _, is := range f.acked {
		want += len(is)
	}
	got := readKafka(t, seeds, topic, want)
	next := map[string]int{}
	for _, r := range got {
		key := string(r.Key)
		prefix, n, ok := strings.Cut(string(r.Value), ":")
		i, err := strconv.Atoi(n)
		if !ok || err != nil || prefix != strings.ToUpper(key) {
			t.Fatalf("Kafka partition %d offset %d: key %q, value %q: not a transformed reading", r.Partition, r.Offset, r.Key, r.Value)
		}
		if i != next[key] {
			t.Fatalf("Kafka partition %d offset %d: %s reading %d follows reading %d: a duplicate, a gap or out of order",
				r.Partition, r.Offset, key, i, next[key]-1)
		}
		next[key]++
	}
	for name, is := range f.acked {
		if next[name] != len(is) {
			t.Errorf("%s: Kafka holds %d of its readings, %d were acknowledged", name, next[name], len(is))
		}
	}
	if len(got) != want {
		t.Errorf("Kafka holds %d readings, the devices had %d acknowledged", len(got), want)
	}
}

// readKafka reads topic from the start with read_committed isolation
// until it has at least want records, then for a moment more, so that a
// record beyond them is seen too.
func readKafka(t *testing.T, seeds []string, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.DisableClientMetrics(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	fetch := func(ctx context.Context) {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				t.Errorf("fetching Kafka %s partition %d: %v", topic, p, err)
			}
		})
		got = append(got, fs.Records()...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	for len(got) < want && ctx.Err() == nil {
		fetch(ctx)
	}
	more, cancelMore := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelMore()
	for more.Err() == nil {
		fetch(more)
	}
	return got
}

// writeCommands writes keyed records (key, value) to a Kafka topic with a
// kgo producer, whose default partitioner keeps a key on one partition.
func writeCommands(t *testing.T, seeds []string, topic string, cmds [][2]string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(cmds))
	for i, c := range cmds {
		recs[i] = &kgo.Record{Key: []byte(c[0]), Value: []byte(c[1])}
	}
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("writing commands to Kafka: %v", err)
	}
}

// killWhen SIGKILLs the node as soon as ready reports true (polled, with
// the safety deadline), and starts it again. ready also says what it
// saw, for the log. It first waits for the node's peers file to list
// that many client connections: the node lists them once a second, for
// its next run to reset them, and a client connected in the second
// before a crash is left to find out by itself (docs/OPERATIONS.md),
// which a producer whose batches in flight all went unanswered does only
// after its request timeout (30 s).
func killWhen(t *testing.T, node *servedLedge, clients int, stage string, begun time.Time, ready func() (bool, string)) {
	t.Helper()
	awaitListedPeers(t, node.dir, clients, nil)
	deadline := time.Now().Add(safety)
	for {
		ok, saw := ready()
		if ok {
			node.stop(syscall.SIGKILL)
			t.Logf("%v: killed while %s: %s", time.Since(begun).Round(time.Millisecond), stage, saw)
			node.start()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never caught %s: %s\n%s", stage, saw, node.logs.Tail(20))
		}
		time.Sleep(time.Millisecond)
	}
}

// commandDevice is a device that long-polls a commands topic for its own
// key (sdk.WithKey) as a named consumer committing what it receives, on
// a connection of its own, and keeps what each poll answered.
type commandDevice struct {
	name string
	cons *sdk.Consumer

	mu     sync.Mutex
	got    []string // the commands received, in order
	parts  []int32  // the partition of each
	empty  int      // polls answered with nothing: woken without a command
	failed int      // polls that failed (the node killed under them)
}

// commandMaxWait is how long a device's poll waits for a command: far
// longer than the test, so that a poll answered without a command is a
// poll woken for nothing, never one that ran out.
const commandMaxWait = 4 * time.Minute

func (d *commandDevice) run(ctx context.Context) {
	for ctx.Err() == nil {
		recs, err := d.cons.Poll(ctx)
		d.mu.Lock()
		for _, r := range recs {
			d.got = append(d.got, string(r.Value))
			d.parts = append(d.parts, r.Partition)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			d.failed++
		case err == nil && len(recs) == 0:
			d.empty++
		}
		d.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond) // as a device would before reconnecting
		}
	}
}

// received returns a copy of the commands d received.
func (d *commandDevice) received() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.got...)
}

// partitionMetric sums a per-partition metric of the node over the
// partitions of topic.
func partitionMetric(t *testing.T, node *servedLedge, name, topic string) float64 {
	t.Helper()
	var sum float64
	for _, l := range strings.Split(get(t, node, "/metrics"), "\n") {
		if !strings.HasPrefix(l, name+"{") || !strings.Contains(l, `topic="`+topic+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", l, err)
		}
		sum += v
	}
	return sum
}

// awaitParked waits until the node holds n parked key polls on topic.
func awaitParked(t *testing.T, node *servedLedge, topic string, n int) {
	t.Helper()
	var got float64
	for deadline := time.Now().Add(safety); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got = partitionMetric(t, node, "ledge_partition_key_polls_parked", topic); got == float64(n) {
			return
		}
	}
	t.Fatalf("%v key polls parked on %s, want %d\n%s", got, topic, n, node.logs.Tail(20))
}
