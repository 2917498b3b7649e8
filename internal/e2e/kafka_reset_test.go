package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ledgemq/ledge/internal/testtool"
	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
)

// resetTopic is a one-partition topic whose segments are small enough
// for a retention pass to delete all but the last few.
var resetTopic = sdk.TopicConfig{Partitions: 1, RetentionBytes: 8 << 10, SegmentBytes: 4 << 10}

// produceKeyed writes records first..first+count-1 of topic, keyed
// "r-NNN", each with a value of 1 KiB (a few to a segment: cl must not
// compress).
func produceKeyed(t *testing.T, cl *kgo.Client, topic string, first, count int) {
	t.Helper()
	ctx := testContext(t)
	for i := first; i < first+count; i++ {
		r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "r-%03d", i), Value: []byte(strings.Repeat("x", 1<<10))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

func keys(first, count int) []string {
	var out []string
	for i := first; i < first+count; i++ {
		out = append(out, fmt.Sprintf("r-%03d", i))
	}
	return out
}

// purgeKafka purges the topic's partition 0 with DeleteRecords, and
// returns its new start.
func purgeKafka(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	del := kmsg.NewPtrDeleteRecordsRequest()
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = topic
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Partition, dp.Offset = 0, -1
	dt.Partitions = append(dt.Partitions, dp)
	del.Topics = append(del.Topics, dt)
	resp, err := del.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("DeleteRecords: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.LowWatermark
}

// retain runs a retention pass and returns the partition's start, which
// it checks has passed first.
func retain(t *testing.T, n *node.Node, c *sdk.Client, topic string, first int64) int64 {
	t.Helper()
	n.EnforceRetention()
	info, err := c.DescribeTopic(testContext(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	start := int64(info.Partitions[0].StartOffset)
	if start <= first {
		t.Fatalf("after retention the log starts at %d, not past %d", start, first)
	}
	return start
}

// kafkajsConsumer is the kafkajs_reset.js process.
type kafkajsConsumer struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

func startKafkajsConsumer(t *testing.T, nodeBin, dir string, n *node.Node, topic, group string) *kafkajsConsumer {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "kafkajs_reset.js"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nodeBin, script, n.KafkaAddr(), adminToken(t, n), topic, group)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	k := &kafkajsConsumer{t: t, cmd: cmd, in: in, lines: make(chan string, 1024)}
	go func() {
		defer close(k.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			k.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return k
}

func (k *kafkajsConsumer) send(cmd string) {
	if _, err := fmt.Fprintln(k.in, cmd); err != nil {
		k.t.Fatalf("kafkajs %s: %v", cmd, err)
	}
}

// readUntil collects the keys kafkajs reads until it has read every key
// of want or printed the line stop; a crash of the consumer fails.
func (k *kafkajsConsumer) readUntil(ctx context.Context, want []string, stop string) []string {
	k.t.Helper()
	var got []string
	for {
		if stop == "" && !slices.ContainsFunc(want, func(s string) bool { return !slices.Contains(got, s) }) {
			return got
		}
		select {
		case <-ctx.Done():
			k.t.Fatalf("kafkajs read %q, still waiting for %q %q", got, want, stop)
		case line, ok := <-k.lines:
			if !ok {
				k.t.Fatalf("kafkajs exited having read %q", got)
			}
			if line == fmt.Sprintf("%q", stop) && stop != "" {
				return got
			}
			var rec struct{ Key, Crash string }
			if err := json.Unmarshal([]byte(line), &rec); err == nil && rec.Crash != "" {
				k.t.Fatalf("the kafkajs consumer crashed: %s", line)
			}
			if rec.Key != "" {
				got = append(got, rec.Key)
			}
		}
	}
}

// TestKafkaKafkajsThroughPurgeAndRetention: a kafkajs group consumer
// (from the beginning) keeps reading when its position falls out of the
// log. Paused while the partition is written and purged, its next fetch
// meets OFFSET_OUT_OF_RANGE; it commits -1 as "no position", reads it
// back and starts over at the new start: it reads every record written
// after the purge. Stopped, its group left at an offset that retention
// then deletes, a new process does the same from the retained start.
func TestKafkaKafkajsThroughPurgeAndRetention(t *testing.T) {
	nodeBin := testtool.Need(t, "Debian package nodejs", "node", "nodejs")
	dir := kafkajsDir(t)
	n := startKafkaNode(t)
	ctx := testContext(t)
	c := dial(t, n)
	createTopic(t, c, "jsreset", resetTopic)
	prod := kafkaClient(t, n, adminToken(t, n), kgo.ProducerBatchCompression(kgo.NoCompression()))

	js := startKafkajsConsumer(t, nodeBin, dir, n, "jsreset", "jsgroup")
	produceKeyed(t, prod, "jsreset", 0, 5)
	js.readUntil(ctx, keys(0, 5), "")
	js.send("pause")
	js.readUntil(ctx, nil, "paused")
	produceKeyed(t, prod, "jsreset", 5, 5)
	if start := purgeKafka(t, prod, "jsreset"); start != 10 {
		t.Fatalf("the purge started the log at %d, want 10", start)
	}
	produceKeyed(t, prod, "jsreset", 10, 5)
	js.send("resume")
	js.readUntil(ctx, keys(10, 5), "")
	js.send("stop")
	js.readUntil(ctx, nil, "stopped")

	produceKeyed(t, prod, "jsreset", 15, 30)
	start := retain(t, n, c, "jsreset", 15)
	produceKeyed(t, prod, "jsreset", 45, 5)
	js = startKafkajsConsumer(t, nodeBin, dir, n, "jsreset", "jsgroup")
	got := js.readUntil(ctx, keys(int(start), 50-int(start)), "")
	t.Logf("after retention started the log at %d, kafkajs read %d records", start, len(got))
	js.send("stop")
	js.readUntil(ctx, nil, "stopped")
}

// TestKafkaFranzGoThroughPurgeAndRetention: the same story with a
// franz-go group consumer resetting to the start.
func TestKafkaFranzGoThroughPurgeAndRetention(t *testing.T) {
	n := startKafkaNode(t)
	ctx := testContext(t)
	c := dial(t, n)
	secret := adminToken(t, n)
	createTopic(t, c, "kgoreset", resetTopic)
	prod := kafkaClient(t, n, secret, kgo.ProducerBatchCompression(kgo.NoCompression()))
	consumer := func() *kgo.Client {
		return kafkaClient(t, n, secret, kgo.ConsumerGroup("kgogroup"), kgo.ConsumeTopics("kgoreset"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.AutoCommitInterval(100*time.Millisecond))
	}
	readAll := func(cl *kgo.Client, want []string) {
		t.Helper()
		var got []string
		for slices.ContainsFunc(want, func(s string) bool { return !slices.Contains(got, s) }) {
			if ctx.Err() != nil {
				t.Fatalf("franz-go read %q, want %q", got, want)
			}
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Key)) })
		}
	}

	cl := consumer()
	produceKeyed(t, prod, "kgoreset", 0, 5)
	readAll(cl, keys(0, 5))
	cl.PauseFetchTopics("kgoreset")
	produceKeyed(t, prod, "kgoreset", 5, 5)
	if start := purgeKafka(t, prod, "kgoreset"); start != 10 {
		t.Fatalf("the purge started the log at %d, want 10", start)
	}
	produceKeyed(t, prod, "kgoreset", 10, 5)
	cl.ResumeFetchTopics("kgoreset")
	readAll(cl, keys(10, 5))
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	produceKeyed(t, prod, "kgoreset", 15, 30)
	start := retain(t, n, c, "kgoreset", 15)
	produceKeyed(t, prod, "kgoreset", 45, 5)
	readAll(consumer(), keys(int(start), 50-int(start)))
}
