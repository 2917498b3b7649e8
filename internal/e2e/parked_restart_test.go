package e2e

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

var parkedRounds = flag.Int("parked.rounds", 3, "SIGKILLs under parked consumers in each TestParked* test (8 for the figures of docs/OPERATIONS.md)")

// parkedMaxWait is how long the parked polls of TestParkedConsumersAfterKill
// wait for records: a fleet's devices park polls for minutes. A client
// that learns of the restart only when its poll runs out, or only after
// its request timeout on top (30 s), misses the test's bound.
const parkedMaxWait = 2 * time.Minute

// parkedBound is how long after the restarted node is ready a parked
// consumer may take to print the record produced then. It is far above
// what the node's reset of its predecessor's peers gives (the figures are
// logged), and far below what waiting out a poll would take.
const parkedBound = 20 * time.Second

// TestParkedConsumersAfterKill parks every kind of consumer in a long
// poll on an empty topic of `ledge serve`: an SDK consumer, an SDK group
// member and `ledge consume --follow`, each on a connection of its own.
// The node is SIGKILLed, with nothing said to the clients, and started
// again; a record is produced; every consumer must receive it before its
// poll's max wait could have run out. The parked clients send nothing
// meanwhile (no poll runs out, a keep-alive is too short to be answered
// with a stateless reset): they hear of the restart from the node, which
// resets the connections its predecessor listed in the data directory.
// The time from ready to each delivery is logged per round.
func TestParkedConsumersAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	served := newServedLedge(t, buildLedge(t), filepath.Join(t.TempDir(), "ledge-data"))
	served.start()
	defer served.checkNoPanic()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prod := parkedProducer(ctx, t, served, "parked")

	type delivery struct {
		who   string
		value string
		at    time.Time
	}
	got := make(chan delivery, 64)
	follow := func(who string, poll func(context.Context) ([]*sdk.Record, error)) {
		for ctx.Err() == nil {
			recs, err := poll(ctx)
			now := time.Now()
			for _, r := range recs {
				got <- delivery{who, string(r.Value), now}
			}
			if err != nil && ctx.Err() == nil {
				t.Logf("%s: poll: %v", who, err)
			}
		}
	}

	sdkClient := served.dial(ctx)
	defer sdkClient.Close()
	cons, err := sdkClient.NewConsumer(ctx, "parked", sdk.WithMaxWait(parkedMaxWait))
	if err != nil {
		t.Fatal(err)
	}
	groupClient := served.dial(ctx)
	defer groupClient.Close()
	member, err := groupClient.NewGroupConsumer(ctx, "parked-group", []string{"parked"},
		sdk.WithGroupMaxWait(parkedMaxWait), sdk.WithDelivery(sdk.AtMostOnce))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	go func() { follow("sdk consumer", cons.Poll); done <- struct{}{} }()
	go func() { follow("group member", member.Poll); done <- struct{}{} }()
	defer func() {
		cancel()
		<-done
		<-done
	}()

	cli := served.client("consume", "parked", "--follow", "--from", "earliest", "--max-wait", parkedMaxWait.String())
	stdout, err := cli.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var cliErr strings.Builder
	cli.Stderr = &cliErr
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Process.Kill(); _ = cli.Wait() }()
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			got <- delivery{"ledge consume --follow", strings.TrimSpace(lines.Text()), time.Now()}
		}
	}()

	kinds := []string{"sdk consumer", "group member", "ledge consume --follow"}
	// Every kind receives a first record, so that all are known to be
	// following, and their polls after it are parked.
	awaitAll := func(value string, since time.Time) map[string]time.Duration {
		took := map[string]time.Duration{}
		deadline := time.After(safety)
		for len(took) < len(kinds) {
			select {
			case d := <-got:
				if d.value == value {
					took[d.who] = d.at.Sub(since)
				}
			case <-deadline:
				t.Fatalf("%q reached only %v\nledge consume: %s\nnode:\n%s", value, took, cliErr.String(), served.logs.Tail(30))
			}
		}
		return took
	}
	if err := prod.ProduceSync(ctx, &sdk.Record{Value: []byte("warm-up")}); err != nil {
		t.Fatal(err)
	}
	awaitAll("warm-up", time.Now())

	figures := map[string][]time.Duration{}
	var before []uint16
	for round := range *parkedRounds {
		// Parked: the connections of the three consumers (and the
		// admin's) are listed for a successor, all of them new since
		// the last kill.
		before = awaitListedPeers(t, served.dir, 4, before)
		time.Sleep(500 * time.Millisecond) // past the polls' arrival: nothing in flight
		served.stop(syscall.SIGKILL)
		ready := served.start()
		value := fmt.Sprintf("after-kill-%d", round)
		pctx, pcancel := context.WithTimeout(ctx, parkedBound)
		err := prod.ProduceSync(pctx, &sdk.Record{Value: []byte(value)})
		pcancel()
		if err != nil {
			t.Fatalf("round %d: produce after the restart: %v", round, err)
		}
		took := awaitAll(value, ready)
		for who, d := range took {
			figures[who] = append(figures[who], d)
			if d > parkedBound {
				t.Errorf("round %d: %s received the record %v after the node was ready: it waited for its poll to run out",
					round, who, d.Round(time.Millisecond))
			}
		}
	}
	if !strings.Contains(served.logs.String(), "reset the connections of the node's previous run") {
		t.Errorf("no restarted node reset its predecessor's connections:\n%s", served.logs.Tail(30))
	}
	for _, who := range kinds {
		t.Logf("%s: ready to the record produced after a SIGKILL: %s", who, median(figures[who]))
	}
}

// TestParkedConsumerProbesAForgetfulNode: a restarted node that has no
// list of its predecessor's connections (lost, or the connection was
// opened after the last write of it) resets nobody. A parked SDK consumer
// then probes the node once its poll is a second overdue; the probe meets
// a stateless reset and the consumer reconnects, well before its request
// timeout (30 s) would have ended the poll. The time from ready to
// delivery is logged: about the poll's max wait and a second.
func TestParkedConsumerProbesAForgetfulNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	served := newServedLedge(t, buildLedge(t), filepath.Join(t.TempDir(), "ledge-data"))
	served.start()
	defer served.checkNoPanic()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prod := parkedProducer(ctx, t, served, "forgotten")
	const maxWait = 3 * time.Second
	c := served.dial(ctx)
	defer c.Close()
	cons, err := c.NewConsumer(ctx, "forgotten", sdk.WithMaxWait(maxWait))
	if err != nil {
		t.Fatal(err)
	}
	type delivery struct {
		value string
		at    time.Time
	}
	got := make(chan delivery, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			recs, _ := cons.Poll(ctx)
			for _, r := range recs {
				got <- delivery{string(r.Value), time.Now()}
			}
		}
	}()
	defer func() { cancel(); <-done }()

	var took []time.Duration
	for round := range *parkedRounds {
		value := fmt.Sprintf("round-%d", round)
		// A poll is parked a moment after it was sent; kill the node
		// within the max wait of the one parked now.
		time.Sleep(maxWait / 2)
		served.stop(syscall.SIGKILL)
		if err := os.Remove(filepath.Join(served.dir, node.PeersFile)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		ready := served.start()
		pctx, pcancel := context.WithTimeout(ctx, parkedBound)
		err := prod.ProduceSync(pctx, &sdk.Record{Value: []byte(value)})
		pcancel()
		if err != nil {
			t.Fatalf("round %d: produce after the restart: %v", round, err)
		}
		select {
		case d := <-got:
			if d.value != value {
				t.Fatalf("round %d: received %q, want %q", round, d.value, value)
			}
			took = append(took, d.at.Sub(ready))
			if d.at.Sub(ready) > parkedBound {
				t.Errorf("round %d: the record came %v after ready: the consumer waited out its request timeout", round, d.at.Sub(ready))
			}
		case <-time.After(safety):
			t.Fatalf("round %d: the consumer never received %q\n%s", round, value, served.logs.Tail(20))
		}
	}
	t.Logf("a consumer the node did not reset (max wait %v): ready to delivery %s", maxWait, median(took))
}

// awaitListedPeers waits until the node's peers file lists at least n
// client ports, none of them in old, and returns them.
func awaitListedPeers(t *testing.T, dir string, n int, old []uint16) []uint16 {
	t.Helper()
	path := filepath.Join(dir, node.PeersFile)
	var ports []uint16
	for deadline := time.Now().Add(safety); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil || len(b) < 8 {
			continue
		}
		peers, err := quic.ParsePeers(b[8:]) // past the file's magic and CRC
		if err != nil {
			continue
		}
		ports = ports[:0]
		for _, p := range peers {
			if port := p.Addr.Port(); !slices.Contains(ports, port) && !slices.Contains(old, port) {
				ports = append(ports, port)
			}
		}
		if len(ports) >= n {
			return ports
		}
	}
	t.Fatalf("the peers file never listed %d new connections (last: %v)", n, ports)
	return nil
}

// TestParkedKafkaFetchAfterKill: a franz-go consumer parked in a long
// fetch on the Kafka listener of `ledge serve`. The kernel resets the TCP
// connections of a killed process, so the client learns at once and
// reconnects; this test holds that, over three SIGKILLs, and logs the
// time from ready to the record produced then.
func TestParkedKafkaFetchAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	served := newServedLedge(t, buildLedge(t), filepath.Join(t.TempDir(), "ledge-data"))
	kafkaAddr := freeTCPPort(t)
	served.env = append(served.env, "LEDGE_KAFKA_LISTEN="+kafkaAddr)
	served.start()
	defer served.checkNoPanic()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prod := parkedProducer(ctx, t, served, "fetched")
	token, err := os.ReadFile(filepath.Join(served.dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(kafkaAddr),
		kgo.SASL(plain.Auth{User: "test", Pass: strings.TrimSpace(string(token))}.AsMechanism()),
		kgo.ConsumeTopics("fetched"),
		kgo.FetchMaxWait(parkedMaxWait),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	type delivery struct {
		value string
		at    time.Time
	}
	got := make(chan delivery, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) { got <- delivery{string(r.Value), now} })
		}
	}()
	defer func() { cancel(); <-done }()
	await := func(value string) time.Time {
		select {
		case d := <-got:
			if d.value != value {
				t.Fatalf("received %q, want %q", d.value, value)
			}
			return d.at
		case <-time.After(safety):
			t.Fatalf("the Kafka consumer never received %q\n%s", value, served.logs.Tail(20))
		}
		return time.Time{}
	}
	if err := prod.ProduceSync(ctx, &sdk.Record{Value: []byte("warm-up")}); err != nil {
		t.Fatal(err)
	}
	await("warm-up")
	var took []time.Duration
	for round := range *parkedRounds {
		time.Sleep(time.Second) // the next fetch is parked
		served.stop(syscall.SIGKILL)
		ready := served.start()
		value := fmt.Sprintf("after-kill-%d", round)
		pctx, pcancel := context.WithTimeout(ctx, parkedBound)
		err := prod.ProduceSync(pctx, &sdk.Record{Value: []byte(value)})
		pcancel()
		if err != nil {
			t.Fatalf("round %d: produce after the restart: %v", round, err)
		}
		d := await(value).Sub(ready)
		took = append(took, d)
		if d > parkedBound {
			t.Errorf("round %d: the fetch returned the record %v after ready: it waited out its max wait", round, d)
		}
	}
	t.Logf("kafka consumer (franz-go): ready to the record produced after a SIGKILL: %s", median(took))
}

var parkedFleet = flag.Int("parked.fleet", 0, "devices of TestParkedFleetAfterKill: SDK consumers parked on one node, each on its own connection (0 skips the test)")

// TestParkedFleetAfterKill parks -parked.fleet SDK consumers, each a
// device with its own connection, on `ledge serve`, SIGKILLs and restarts
// the node, produces one record and logs how long after ready the
// devices received it: the median and the last. All devices dial from
// 127.0.0.1, so their reconnections share one source address's handshake
// allowance (a burst of 100, then 50 a second; docs/OPERATIONS.md), which
// a fleet spread over many addresses does not.
func TestParkedFleetAfterKill(t *testing.T) {
	if *parkedFleet <= 0 {
		t.Skip("-parked.fleet N runs it")
	}
	served := newServedLedge(t, buildLedge(t), filepath.Join(t.TempDir(), "ledge-data"))
	served.start()
	defer served.checkNoPanic()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prod := parkedProducer(ctx, t, served, "fleet")
	type delivery struct {
		value string
		at    time.Time
	}
	got := make(chan delivery, 4**parkedFleet)
	done := make(chan struct{}, *parkedFleet)
	for range *parkedFleet {
		c := served.dial(ctx)
		defer c.Close()
		cons, err := c.NewConsumer(ctx, "fleet", sdk.WithMaxWait(parkedMaxWait))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer func() { done <- struct{}{} }()
			for ctx.Err() == nil {
				recs, _ := cons.Poll(ctx)
				now := time.Now()
				for _, r := range recs {
					got <- delivery{string(r.Value), now}
				}
			}
		}()
	}
	defer func() {
		cancel()
		for range *parkedFleet {
			<-done
		}
	}()
	await := func(value string, since time.Time) []time.Duration {
		var took []time.Duration
		deadline := time.After(safety)
		for len(took) < *parkedFleet {
			select {
			case d := <-got:
				if d.value == value {
					took = append(took, d.at.Sub(since))
				}
			case <-deadline:
				t.Fatalf("%q reached %d of %d devices", value, len(took), *parkedFleet)
			}
		}
		return took
	}
	if err := prod.ProduceSync(ctx, &sdk.Record{Value: []byte("warm-up")}); err != nil {
		t.Fatal(err)
	}
	await("warm-up", time.Now())
	awaitListedPeers(t, served.dir, *parkedFleet+1, nil)
	time.Sleep(500 * time.Millisecond)
	served.stop(syscall.SIGKILL)
	ready := served.start()
	if err := prod.ProduceSync(ctx, &sdk.Record{Value: []byte("after-kill")}); err != nil {
		t.Fatal(err)
	}
	acked := time.Since(ready)
	took := await("after-kill", ready)
	slices.Sort(took)
	t.Logf("%d parked devices: ready to the record after a SIGKILL: median %v, 90th %v, last %v (the record acknowledged %v after ready)", len(took),
		took[len(took)/2].Round(time.Millisecond), took[len(took)*9/10].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond),
		acked.Round(time.Millisecond))
}

// TestAHealthyNodeIsNeverProbed: the probe of an overdue poll costs a
// consumer of a healthy node nothing. An SDK consumer polls an empty
// topic with a short max wait for several seconds; the node answers each
// poll when its max wait runs out, and counts no request besides the
// polls: not one probe.
func TestAHealthyNodeIsNeverProbed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	served := newServedLedge(t, buildLedge(t), filepath.Join(t.TempDir(), "ledge-data"))
	served.start()
	defer served.checkNoPanic()
	ctx := context.Background()
	admin := served.dial(ctx)
	defer admin.Close()
	if _, err := admin.CreateTopic(ctx, "quiet", sdk.TopicConfig{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	c := served.dial(ctx)
	defer c.Close()
	cons, err := c.NewConsumer(ctx, "quiet", sdk.WithMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	describes := func() string {
		var n []string
		for _, l := range strings.Split(get(t, served, "/metrics"), "\n") {
			if strings.HasPrefix(l, `ledge_requests_total{kind="describe-topic"`) {
				n = append(n, l)
			}
		}
		return strings.Join(n, "; ")
	}
	before := describes()
	if before == "" {
		t.Fatal("the node counts no DescribeTopic, though NewConsumer sent one")
	}
	polls := 0
	for begun := time.Now(); time.Since(begun) < 5*time.Second; polls++ {
		if _, err := cons.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if after := describes(); after != before {
		t.Fatalf("DescribeTopic requests during %d polls of a healthy node: %q, before %q: the consumer probed", polls, after, before)
	}
	t.Logf("%d empty polls of 200 ms, no probe", polls)
}

// parkedProducer creates topic, of one partition, on served and returns
// a producer of it, on an admin client of its own that stays connected
// until the test ends.
func parkedProducer(ctx context.Context, t *testing.T, served *servedLedge, topic string) *sdk.Producer {
	t.Helper()
	admin := served.dial(ctx)
	t.Cleanup(func() { admin.Close() })
	if _, err := admin.CreateTopic(ctx, topic, sdk.TopicConfig{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	prod, err := admin.NewProducer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return prod
}
