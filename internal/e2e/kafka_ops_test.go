package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/sdk"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKafkaRevokedTokenClosesItsConnections: revoking a token closes the
// Kafka connections that authenticated with it, as it closes QUIC ones: a
// consumer's fetch parked on a quiet partition ends at once with the
// connection, instead of waiting out its long poll, and the client cannot
// authenticate again.
func TestKafkaRevokedTokenClosesItsConnections(t *testing.T) {
	n := startKafkaNode(t)
	ctx := testContext(t)
	admin := dial(t, n)
	createTopic(t, admin, "quiet", sdk.TopicConfig{Partitions: 1})
	info, secret, err := admin.CreateToken(ctx, sdk.TokenSpec{Label: "reader", Topic: "quiet", Scopes: sdk.ScopeConsume})
	if err != nil {
		t.Fatal(err)
	}
	cl := kafkaClient(t, n, secret, kgo.RetryTimeout(time.Second))

	fetched := make(chan error, 1)
	go func() {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32((10 * time.Minute).Milliseconds()), 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "quiet"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		_, err := req.RequestWith(ctx, cl)
		fetched <- err
	}()
	for n.ParkedPolls() == 0 { // the fetch waits on the node
		if ctx.Err() != nil {
			t.Fatal("the fetch never parked")
		}
		time.Sleep(time.Millisecond)
	}
	if err := admin.RevokeToken(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	err = <-fetched
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the parked fetch of a revoked token ended with %v, want its connection closed", err)
	}
	if err := cl.Ping(ctx); err == nil {
		t.Fatal("a revoked token's client connected again")
	}
}

// TestKafkaRequestsInMetrics: /metrics counts Kafka requests per API,
// with the errors their responses carry, in series that name no
// connection or client.
func TestKafkaRequestsInMetrics(t *testing.T) {
	m := ops.NewPromMetrics("test")
	n := startNode(t, func(c *node.Config) {
		c.KafkaListen = "127.0.0.1:0"
		c.Metrics = m
	})
	ctx := testContext(t)
	cl := kafkaClient(t, n, adminToken(t, n))
	kafkaCreateTopic(t, cl, "counted", 1)
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "counted", Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"never-created"}
	dt := kmsg.NewDeleteTopicsRequestTopic()
	name := "never-created"
	dt.Topic = &name
	del.Topics = append(del.Topics, dt)
	if _, err := del.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}

	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			key := f.GetName()
			for _, l := range s.GetLabel() {
				if !slices.Contains([]string{"api", "error"}, l.GetName()) && slices.Contains([]string{"ledge_kafka_requests_total", "ledge_kafka_request_errors_total", "ledge_kafka_request_duration_seconds"}, key) {
					t.Errorf("%s has a label %s", key, l.GetName())
				}
			}
			for _, l := range s.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			series[key] = s.GetCounter().GetValue() + float64(s.GetHistogram().GetSampleCount())
		}
	}
	if got := series["ledge_kafka_requests_total api=CreateTopics"]; got != 1 {
		t.Errorf("CreateTopics requests %v, want 1", got)
	}
	if got := series["ledge_kafka_requests_total api=Produce"]; got < 1 {
		t.Errorf("Produce requests %v, want at least 1 (3 records produced one at a time)", got)
	}
	if got, want := series["ledge_kafka_request_duration_seconds api=Produce"], series["ledge_kafka_requests_total api=Produce"]; got != want {
		t.Errorf("Produce latencies observed %v, requests %v", got, want)
	}
	if got := series["ledge_kafka_request_errors_total api=Produce error=NONE"] + series["ledge_kafka_request_errors_total api=CreateTopics"]; got != 0 {
		t.Errorf("successful requests counted as errors: %v", got)
	}
	if got := series["ledge_kafka_request_errors_total api=DeleteTopics error=UNKNOWN_TOPIC_OR_PARTITION"]; got != 1 {
		t.Errorf("DeleteTopics of an unknown topic counted %v times as UNKNOWN_TOPIC_OR_PARTITION, want 1; series: %v", got, series)
	}
}
