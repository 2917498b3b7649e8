package downlink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/node/uplink/uplinktest"
	"github.com/ledgemq/ledge/record"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cloud is the Kafka topic the tests read.
const cloud = "commands"

// world is a kfake cluster holding cloud and a local topic of a few
// partitions on the in-memory log, with a producer registry.
type world struct {
	t         testing.TB
	kafka     *kfake.Cluster
	writer    *kgo.Client
	topic     fence.TopicID
	meta      *ownertest.Meta
	producers *owner.Producers
	owners    []*owner.Owner
	sent      map[int32][]*kgo.Record // what was written to Kafka, per partition
}

func newWorld(t testing.TB, kafkaPartitions, localPartitions int) *world {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(kafkaPartitions), cloud))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	wr, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wr.Close)
	w := &world{t: t, kafka: c, writer: wr, topic: fence.TopicID{0xd0, 1}, meta: ownertest.NewMeta(), sent: map[int32][]*kgo.Record{}}
	if w.producers, err = owner.OpenProducers(w.meta); err != nil {
		t.Fatal(err)
	}
	for i := range localPartitions {
		l := ownertest.NewLog(w.meta, "p"+strconv.Itoa(i))
		o, err := owner.NewOwner(owner.OwnerConfig{Topic: w.topic, Partition: uint32(i), Log: l, Meta: w.meta, Producers: w.producers})
		if err != nil {
			t.Fatal(err)
		}
		w.owners = append(w.owners, o)
	}
	return w
}

// write writes n keyed records with a header to each Kafka partition.
func (w *world) write(n int) {
	w.t.Helper()
	var recs []*kgo.Record
	parts := w.kafkaPartitions()
	for k := range parts {
		for range n {
			i := len(w.sent[k])
			r := &kgo.Record{Topic: cloud, Partition: k,
				Key:     fmt.Appendf(nil, "device-%d", i%7),
				Value:   fmt.Appendf(nil, "k%d-%d", k, i),
				Headers: []kgo.RecordHeader{{Key: "cmd", Value: []byte("reboot")}}}
			w.sent[k] = append(w.sent[k], r)
			recs = append(recs, r)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.writer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) kafkaPartitions() int32 {
	w.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(cloud)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(context.Background(), w.writer)
	if err != nil {
		w.t.Fatal(err)
	}
	return int32(len(resp.Topics[0].Partitions))
}

func (w *world) targets() []Target {
	out := make([]Target, len(w.owners))
	for i, o := range w.owners {
		out[i] = o
	}
	return out
}

func (w *world) config() Config {
	return Config{
		Spec:      Spec{Topic: "commands", TopicID: w.topic, Seeds: w.kafka.ListenAddrs(), From: cloud},
		Targets:   w.targets(),
		Producers: w.producers,
		Meta:      w.meta,
		KafkaOpts: uplinktest.FastKafka(),
		PollWait:  50 * time.Millisecond,
		Wait:      func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	}
}

// run starts a downlink; stop cancels it and returns what Run returned.
func (w *world) run(cfg Config) (d *Downlink, stop func() error) {
	w.t.Helper()
	d, err := New(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once atomic.Bool
	var res error
	stop = func() error {
		if once.CompareAndSwap(false, true) {
			cancel()
			res = <-done
		}
		return res
	}
	w.t.Cleanup(func() { _ = stop() })
	return d, stop
}

// local reads every record of local partition p.
func (w *world) local(p int) []record.Record {
	w.t.Helper()
	var out []record.Record
	var it record.RecordIterator
	o := w.owners[p]
	for from := o.State().LogStart; from < o.State().HighWatermark; {
		res, err := o.Poll(context.Background(), owner.PollRequest{From: owner.FromOffset, Offset: from})
		if err != nil {
			w.t.Fatal(err)
		}
		for _, b := range res.Batches {
			if err := it.Reset(b, len(b)); err != nil {
				w.t.Fatal(err)
			}
			for r, ok := it.Next(); ok; r, ok = it.Next() {
				if r.Offset < from {
					continue
				}
				c := record.Record{Offset: r.Offset, Timestamp: r.Timestamp, Key: append([]byte(nil), r.Key...), Value: append([]byte(nil), r.Value...)}
				for _, h := range r.Headers {
					c.Headers = append(c.Headers, record.Header{Key: h.Key, Value: append([]byte(nil), h.Value...)})
				}
				out = append(out, c)
			}
		}
		from = res.Next
	}
	return out
}

// waitLocal waits until the local topic holds n records in all.
func (w *world) waitLocal(n int) {
	w.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := 0
		for _, o := range w.owners {
			st := o.State()
			got += int(st.HighWatermark - st.LogStart)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("the local topic holds %d records, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func header(r record.Record, key string) string {
	v := ""
	for _, h := range r.Headers {
		if h.Key == key {
			v = string(h.Value)
		}
	}
	return v
}

// checkExactlyOnce fails unless local partition k mod n holds every
// record written to Kafka partition k exactly once, in Kafka's order,
// with its key, value and headers.
func (w *world) checkExactlyOnce() {
	w.t.Helper()
	byKafka := map[int32][]record.Record{}
	for p := range w.owners {
		for _, r := range w.local(p) {
			k, err := strconv.ParseInt(header(r, HeaderKafkaPartition), 10, 32)
			if err != nil {
				w.t.Fatalf("local record %d of partition %d has no %s header", r.Offset, p, HeaderKafkaPartition)
			}
			if int(k)%len(w.owners) != p {
				w.t.Fatalf("Kafka partition %d landed on local partition %d, want %d", k, p, int(k)%len(w.owners))
			}
			byKafka[int32(k)] = append(byKafka[int32(k)], r)
		}
	}
	for k, sent := range w.sent {
		got := byKafka[k]
		if len(got) != len(sent) {
			w.t.Fatalf("Kafka partition %d: %d records locally, want %d", k, len(got), len(sent))
		}
		for i, r := range got {
			s := sent[i]
			if string(r.Value) != string(s.Value) || string(r.Key) != string(s.Key) {
				w.t.Fatalf("Kafka partition %d record %d: got %s=%s, want %s=%s", k, i, r.Key, r.Value, s.Key, s.Value)
			}
			if header(r, "cmd") != "reboot" || header(r, HeaderKafkaOffset) != strconv.FormatInt(s.Offset, 10) {
				w.t.Fatalf("Kafka partition %d record %d: headers %v, want cmd=reboot and offset %d", k, i, r.Headers, s.Offset)
			}
			if r.Timestamp != s.Timestamp.UnixMilli() {
				w.t.Fatalf("Kafka partition %d record %d: timestamp %d, want %d", k, i, r.Timestamp, s.Timestamp.UnixMilli())
			}
		}
	}
}

// TestDownlinkKeepsKeysHeadersAndOrder: three Kafka partitions land on
// two local partitions (k mod 2), each record once, in Kafka's order, with
// its key, value, timestamp and headers, plus the two headers naming its
// Kafka partition and offset; the status counts them with no lag.
//
// covers: G80
func TestDownlinkKeepsKeysHeadersAndOrder(t *testing.T) {
	w := newWorld(t, 3, 2) // Kafka partitions 0 and 2 share local partition 0
	w.write(300)
	d, _ := w.run(w.config())
	w.waitLocal(900)
	w.checkExactlyOnce()

	st := d.Status()
	if st.State != Running || st.Records != 900 || len(st.Partitions) != 3 {
		t.Fatalf("status %+v, want running with 900 records over 3 partitions", st)
	}
	for _, p := range st.Partitions {
		if p.Position != 300 || p.Records != 300 || p.Lag != 0 || p.Local != uint32(p.Partition)%2 {
			t.Fatalf("partition status %+v, want position 300, 300 records, no lag, local %d", p, p.Partition%2)
		}
	}
}

// TestDownlinkResumesAtTheExactPosition: a downlink started again (a
// restart) reads its position back from the newest batch it appended,
// even when the checkpoint is behind (a crash between an append and its
// checkpoint), and appends only the records written since.
//
// covers: G80
func TestDownlinkResumesAtTheExactPosition(t *testing.T) {
	w := newWorld(t, 2, 2)
	w.write(100)
	_, stop := w.run(w.config())
	w.waitLocal(200)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// A crash between a durable append and its checkpoint: the
	// checkpoint is behind what the local partition holds.
	for k := range int32(2) {
		if _, err := putCheckpoint(w.meta, w.topic, cloud, k, 40); err != nil {
			t.Fatal(err)
		}
	}
	w.write(100)
	d, _ := w.run(w.config())
	w.waitLocal(400)
	w.checkExactlyOnce()
	if got := d.Status().Records; got != 200 {
		t.Fatalf("the restarted downlink appended %d records, want the 200 new ones", got)
	}
}

// TestDownlinkZombieAppendIsRefused: a second incarnation of a downlink
// (replaced while the old loop still runs) fences the first one's
// producer: the old loop's late append of records it fetched is refused,
// it stops as fenced, and every record is in the topic once.
//
// covers: G81
func TestDownlinkZombieAppendIsRefused(t *testing.T) {
	w := newWorld(t, 1, 1)
	w.write(50)
	old, stopOld := w.run(w.config())
	w.waitLocal(50)
	// A second incarnation (the downlink replaced while the old loop
	// still runs) fences the first one's producer.
	w.run(w.config())
	deadline := time.Now().Add(30 * time.Second)
	for w.producers.Registration(old.Status().Partitions[0].Producer).Epoch == old.Status().Partitions[0].Epoch {
		if time.Now().After(deadline) {
			t.Fatal("the second downlink never initialized its producer")
		}
		time.Sleep(time.Millisecond)
	}
	w.write(50)
	w.waitLocal(100)
	// The old loop fetched the same 50 records: its append was refused.
	for old.Status().State != Fenced {
		if time.Now().After(deadline) {
			t.Fatalf("the old downlink is %v, want fenced", old.Status().State)
		}
		time.Sleep(time.Millisecond)
	}
	if err := stopOld(); !errors.Is(err, ErrFenced) || !errors.Is(err, fence.ErrFencedProducer) {
		t.Fatalf("the old downlink's Run returned %v, want ErrFenced", err)
	}
	w.checkExactlyOnce()
}

// TestDownlinkReconnectsAfterAWANCut: while the WAN is cut nothing is
// appended; once it is back the downlink reconnects by itself and appends
// what the cloud wrote meanwhile, exactly once.
//
// covers: G82
func TestDownlinkReconnectsAfterAWANCut(t *testing.T) {
	w := newWorld(t, 2, 1)
	w.write(20)
	d, _ := w.run(w.config())
	w.waitLocal(40)

	// The WAN is cut on the edge's side: every fetch closes its
	// connection, while the cloud goes on writing.
	var down atomic.Bool
	var refused atomic.Int64
	down.Store(true)
	w.kafka.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		w.kafka.KeepControl()
		if !down.Load() || req.Key() != int16(kmsg.Fetch) {
			return nil, nil, false
		}
		refused.Add(1)
		return nil, errors.New("unreachable"), true
	})
	w.write(30)
	for refused.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	if got := w.owners[0].State().HighWatermark; got != 40 {
		t.Fatalf("the local topic holds %d records during the cut, want the 40 from before it", got)
	}
	down.Store(false)
	w.waitLocal(100)
	w.checkExactlyOnce()
	if st := d.Status(); !st.Connected || st.State != Running {
		t.Fatalf("status after the cut %+v, want running and connected", st)
	}
}

// TestDownlinkSaysWhatKafkaDeleted: records Kafka deleted (retention)
// before the downlink read them are skipped, counted and said in the
// status; the downlink goes on with the next record.
//
// covers: G82
func TestDownlinkSaysWhatKafkaDeleted(t *testing.T) {
	w := newWorld(t, 1, 1)
	w.write(10)
	_, stop := w.run(w.config())
	w.waitLocal(10)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	w.write(10)
	// Retention deletes records 10 to 14 before the downlink reads them.
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = cloud
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 15
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), w.writer)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("delete records: %v %+v", err, resp)
	}
	d, _ := w.run(w.config())
	w.waitLocal(15)
	st := d.Status()
	if p := st.Partitions[0]; p.Deleted != 5 || p.Position != 20 {
		t.Fatalf("partition status %+v, want 5 deleted and position 20", p)
	}
	if st.LastError == "" {
		t.Fatal("the status does not say that Kafka deleted records")
	}
	got := w.local(0)
	if len(got) != 15 || string(got[10].Value) != "k0-15" {
		t.Fatalf("the local topic holds %d records, the 11th %q; want 15, then k0-15", len(got), got[min(10, len(got)-1)].Value)
	}
}

// TestDownlinkResumesFromTheCheckpointAfterAPurge: when a purge deleted
// the batch whose header held the position, the downlink resumes from
// its checkpoint and appends only the records written since.
//
// covers: G80
func TestDownlinkResumesFromTheCheckpointAfterAPurge(t *testing.T) {
	w := newWorld(t, 1, 1)
	w.write(100)
	_, stop := w.run(w.config())
	w.waitLocal(100)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// The purge deletes the batch whose header held the position.
	if _, err := w.owners[0].Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.write(50)
	d, _ := w.run(w.config())
	w.waitLocal(50)
	got := w.local(0)
	if len(got) != 50 || string(got[0].Value) != "k0-100" {
		t.Fatalf("after the purge the topic holds %d records, the first %q; want the 50 new ones from k0-100", len(got), got[0].Value)
	}
	if p := d.Status().Partitions[0]; p.Position != 150 || p.Records != 50 {
		t.Fatalf("partition status %+v, want position 150 and 50 records", p)
	}
}

// TestDownlinkSaysKafkaWentBackwards: a Kafka topic re-created under the
// same name starts its offsets again below the position the local topic
// holds; the downlink says so in its status instead of waiting silently.
func TestDownlinkSaysKafkaWentBackwards(t *testing.T) {
	w := newWorld(t, 1, 1)
	w.write(20)
	_, stop := w.run(w.config())
	w.waitLocal(20)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{cloud}
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(cloud)
	del.Topics = append(del.Topics, dt)
	if _, err := del.RequestWith(ctx, w.writer); err != nil {
		t.Fatal(err)
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = cloud, 1, 1
	create.Topics = append(create.Topics, ct)
	if _, err := create.RequestWith(ctx, w.writer); err != nil {
		t.Fatal(err)
	}
	// A client that never knew the old topic's id writes to the new one.
	wr, err := kgo.NewClient(kgo.SeedBrokers(w.kafka.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Close()
	w.writer, w.sent = wr, map[int32][]*kgo.Record{}
	w.write(5)
	d, _ := w.run(w.config())
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(d.Status().LastError, "re-created") {
		if time.Now().After(deadline) {
			t.Fatalf("status %+v, want the re-created Kafka topic said", d.Status())
		}
		time.Sleep(time.Millisecond)
	}
	if got := w.owners[0].State().HighWatermark; got != 20 {
		t.Fatalf("the local topic holds %d records, want the 20 of the old Kafka topic", got)
	}
}

// TestDownlinkShowsKafkasEndAtStart: a downlink started again when it is
// caught up shows Kafka's end of each partition and no lag, though no
// record arrives to say it.
func TestDownlinkShowsKafkasEndAtStart(t *testing.T) {
	w := newWorld(t, 2, 2)
	w.write(40)
	_, stop := w.run(w.config())
	w.waitLocal(80)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	d, _ := w.run(w.config())
	deadline := time.Now().Add(30 * time.Second)
	for st := d.Status(); st.State != Running; st = d.Status() {
		if time.Now().After(deadline) {
			t.Fatalf("status %+v, want running", st)
		}
		time.Sleep(time.Millisecond)
	}
	for _, p := range d.Status().Partitions {
		if p.HighWatermark != 40 || p.Position != 40 || p.Lag != 0 {
			t.Fatalf("partition %+v: want Kafka's end 40, position 40, no lag", p)
		}
	}
}
