package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"slices"
	"testing"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKafkaTLS: with --kafka-tls the listener speaks TLS with the node's
// certificate; a client trusting the node's CA produces and reads.
func TestKafkaTLS(t *testing.T) {
	n := startNode(t, func(c *node.Config) { c.KafkaListen, c.KafkaTLS = "127.0.0.1:0", true })
	ctx := testContext(t)
	pem, err := os.ReadFile(n.Paths().CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no CA certificate")
	}
	cl := kafkaClient(t, n, adminToken(t, n),
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}),
		kgo.DefaultProduceTopic("secure"), kgo.ConsumeTopics("secure"))
	kafkaCreateTopic(t, cl, "secure", 1)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("sealed")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) == 0 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, []string{"sealed"}) {
		t.Fatalf("read %q over TLS", got)
	}
}

// TestKafkaGroupsListedAndDescribed: ListGroups and DescribeGroups show a
// group with a member that joined over Kafka, and its assignment.
func TestKafkaGroupsListedAndDescribed(t *testing.T) {
	n := startKafkaNode(t)
	ctx := testContext(t)
	cl := kafkaClient(t, n, adminToken(t, n))
	kafkaCreateTopic(t, cl, "audit", 2)
	m, held := kafkaJoin(t, cl, "auditors", "", "audit")
	if len(held) != 2 {
		t.Fatalf("the only member holds %v, want both partitions", held)
	}

	lr, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, cl)
	if err != nil || lr.ErrorCode != 0 {
		t.Fatalf("list groups: %v %v", err, kerr.ErrorForCode(lr.ErrorCode))
	}
	if len(lr.Groups) != 1 || lr.Groups[0].Group != "auditors" || lr.Groups[0].ProtocolType != "consumer" {
		t.Fatalf("ListGroups: %+v", lr.Groups)
	}

	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = []string{"auditors"}
	dr, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	g := dr.Groups[0]
	if g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID != m.id {
		t.Fatalf("DescribeGroups: %+v", g)
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(g.Members[0].MemberAssignment); err != nil || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 2 {
		t.Fatalf("the member's assignment %+v (%v), want both partitions of audit", a, err)
	}
}

// TestKafkaScopesAndDeleteTopics: a token that may only consume one topic
// reads it over Kafka but may neither produce to it nor see other
// topics, nor delete it; the admin token deletes it.
func TestKafkaScopesAndDeleteTopics(t *testing.T) {
	n := startKafkaNode(t)
	ctx := testContext(t)
	c := dial(t, n)
	createTopic(t, c, "open", sdk.TopicConfig{Partitions: 1})
	createTopic(t, c, "hidden", sdk.TopicConfig{Partitions: 1})
	produceValues(t, c, "open", "one")
	_, reader, err := c.CreateToken(ctx, sdk.TokenSpec{Label: "reader", Topic: "open", Scopes: sdk.ScopeConsume})
	if err != nil {
		t.Fatal(err)
	}
	cl := kafkaClient(t, n, reader, kgo.ConsumeTopics("open"), kgo.DefaultProduceTopic("open"))

	var got []string
	for len(got) == 0 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("two")}).FirstErr(); err != kerr.TopicAuthorizationFailed {
		t.Fatalf("a produce with a consume-only token: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Topics) != 1 || *md.Topics[0].Topic != "open" {
		t.Fatalf("the reader's Metadata lists %d topics, want only open", len(md.Topics))
	}

	del := func(cl *kgo.Client) int16 {
		req := kmsg.NewPtrDeleteTopicsRequest()
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr("open")
		req.Topics, req.TopicNames = append(req.Topics, rt), []string{"open"}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].ErrorCode
	}
	if code := del(cl); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("DeleteTopics with the reader's token: %v", kerr.ErrorForCode(code))
	}
	admin := kafkaClient(t, n, adminToken(t, n))
	if code := del(admin); code != 0 {
		t.Fatalf("DeleteTopics with the admin token: %v", kerr.ErrorForCode(code))
	}
	if _, err := c.DescribeTopic(ctx, "open"); err == nil {
		t.Fatal("the topic is still there")
	}
}
