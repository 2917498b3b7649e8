package uplinktest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic is the Kafka topic the tests forward to.
const Topic = "central"

// Kafka is a kfake cluster holding Topic.
type Kafka struct {
	*kfake.Cluster
	t          testing.TB
	partitions int
}

// NewKafka starts a cluster of one broker whose Topic has the given
// partitions; it stops with the test.
func NewKafka(t testing.TB, partitions int) *Kafka {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), Topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &Kafka{Cluster: c, t: t, partitions: partitions}
}

// FastKafka makes a client give up quickly on an unreachable cluster, so
// that a forwarder's own backoff (injected, instant) is exercised.
func FastKafka() []kgo.Opt {
	return []kgo.Opt{
		kgo.RetryBackoffFn(func(int) time.Duration { return time.Millisecond }),
		kgo.RequestRetries(2),
		kgo.RecordRetries(2),
	}
}

// ReadCommitted reads back every committed record of Topic, per
// partition, with the Ledge offset each carries in its offsetHeader
// header. It ends each partition with a marker record first, so it
// returns once it has read everything committed before the call.
func (k *Kafka) ReadCommitted(offsetHeader string) (values [][]string, offsets [][]uint64) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := k.partitions
	marker, err := kgo.NewClient(kgo.SeedBrokers(k.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		k.t.Fatal(err)
	}
	defer marker.Close()
	for p := range n {
		if err := marker.ProduceSync(ctx, &kgo.Record{Topic: Topic, Partition: int32(p), Value: []byte("end")}).FirstErr(); err != nil {
			k.t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.ListenAddrs()...), kgo.ConsumeTopics(Topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		k.t.Fatal(err)
	}
	defer cl.Close()
	values, offsets = make([][]string, n), make([][]uint64, n)
	ended := 0
	for ended < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			k.t.Fatalf("reading back: %v (%d of %d partitions ended)", err, ended, n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "end" && len(r.Headers) == 0 {
				ended++
				return
			}
			var off uint64
			for _, h := range r.Headers {
				if h.Key == offsetHeader {
					off, _ = strconv.ParseUint(string(h.Value), 10, 64)
				}
			}
			values[r.Partition] = append(values[r.Partition], string(r.Value))
			offsets[r.Partition] = append(offsets[r.Partition], off)
		})
	}
	return values, offsets
}

// RefuseWhile makes the cluster close the connection of every request
// while down is set, and returns the count of refused requests.
func (k *Kafka) RefuseWhile(down *atomic.Bool) *atomic.Int64 {
	var n atomic.Int64
	k.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		if !down.Load() {
			return nil, nil, false
		}
		n.Add(1)
		return nil, errors.New("unreachable"), true
	})
	return &n
}

// CheckValues fails the test unless Kafka holds exactly want.
func CheckValues(t testing.TB, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("Kafka holds %d records %v..., want %d %v...", len(got), head(got), len(want), head(want))
	}
}

func head(s []string) []string { return s[:min(len(s), 3)] }
