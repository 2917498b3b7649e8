package e2e

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/node"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// startKafkaNode opens a node with a Kafka listener on a free port.
func startKafkaNode(t testing.TB) *node.Node {
	t.Helper()
	return startNode(t, func(c *node.Config) {
		c.KafkaListen = "127.0.0.1:0"
		if os.Getenv("KAFKA_DEBUG") != "" {
			c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	})
}

// adminToken is the secret of the admin token n minted at first start.
func adminToken(t testing.TB, n *node.Node) string {
	t.Helper()
	b, err := os.ReadFile(n.Paths().AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// kafkaClient is a franz-go client of n's Kafka listener, with nothing
// configured beyond the address and the credentials (a Ledge token as
// the SASL/PLAIN password), and opts.
func kafkaClient(t testing.TB, n *node.Node, secret string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{
		kgo.SeedBrokers(n.KafkaAddr()),
		kgo.SASL(plain.Auth{User: "test", Pass: secret}.AsMechanism()),
	}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// kafkaCreateTopic creates a topic with a Kafka CreateTopics request.
func kafkaCreateTopic(t testing.TB, cl *kgo.Client, name string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}
