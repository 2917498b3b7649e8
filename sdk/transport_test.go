package sdk_test

import (
	"context"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

// Clients sharing one socket (a gateway's devices) each produce and
// consume on their own connection; closing one leaves the others working.
func TestClientsShareATransport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := sdk.NewTransport()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	admin, err := sdk.Dial(ctx, nodeAddr, sdk.WithDataDir(nodeDataDir))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	topic := createTopic(ctx, t, admin, "shared-socket")
	var clients []*sdk.Client
	for range 2 {
		c, err := sdk.Dial(ctx, nodeAddr, sdk.WithDataDir(nodeDataDir), sdk.WithTransport(tr))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	send := func(c *sdk.Client, value string) {
		t.Helper()
		p, err := c.NewProducer(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, &sdk.Record{Value: []byte(value)}); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	send(clients[0], "from the first")
	if err := clients[0].Close(); err != nil {
		t.Fatal(err)
	}
	send(clients[1], "from the second")
	cons, err := clients[1].NewConsumer(ctx, topic, sdk.WithStart(sdk.AtFirst()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	var got []string
	for len(got) < 2 {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
	}
	if got[0] != "from the first" || got[1] != "from the second" {
		t.Fatalf("consumed %q", got)
	}
}
