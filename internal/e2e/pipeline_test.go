package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestPipelineDevicesToKafkaThroughKills: devices produce readings into a
// topic, a map transform turns them into summaries (the value upper
// cased, the key kept), and an uplink forwards the summaries to Kafka
// (kfake), all three stages on the ledge binary at once. The node is
// SIGKILLed three times, each at a moment chosen by what the stages
// report: while the devices produce (some readings acknowledged, more on
// their way), while the transform runs (it appended since the restart and
// has input left) and while the uplink forwards (it committed to Kafka
// since the restart and has records left), each once the node lists
// every device's connection for its next run to reset (killWhen). Every device's producer rides
// through the restarts, retrying what was not acknowledged. At the end
// every reading the node acknowledged is in Kafka (read_committed)
// exactly once, transformed, each device's readings in their order.
func TestPipelineDevicesToKafkaThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	const (
		devices    = 6
		per        = 500 // readings of each device
		parts      = 2
		kafkaTopic = "cloud.summaries"
	)
	kafka, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, kafkaTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	bin := buildLedge(t)
	wasm := buildPlugin(t, mapTransformPkg)
	begun := time.Now()
	node := newServedLedge(t, bin, filepath.Join(t.TempDir(), "ledge-data"))
	node.env = append(node.env, honestPluginDeadline) // the kills are tested, not the deadline
	node.start()
	defer node.checkNoPanic()
	ctx := context.Background()
	admin := node.dial(ctx)
	defer admin.Close()
	for _, topic := range []string{"readings", "summaries"} {
		if _, err := admin.CreateTopic(ctx, topic, sdk.TopicConfig{Partitions: parts, Durability: sdk.DurabilityAlways}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.AddPlugin(ctx, "upper", sdk.PluginTransform, wasm); err != nil {
		t.Fatal(err)
	}
	if err := admin.AddTransform(ctx, "summarize", sdk.TransformConfig{Plugin: "upper", From: "readings", To: "summaries",
		Params: map[string]string{"mode": "map"}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.AddUplink(ctx, "summaries", sdk.UplinkConfig{Seeds: kafka.ListenAddrs(), To: kafkaTopic}); err != nil {
		t.Fatal(err)
	}

	// The devices produce a third of their readings before each kill, so
	// that every stage has records to move when the node dies under it.
	fleet := startReadingFleet(ctx, t, node, "readings", devices, per, 10*time.Millisecond)
	fleet.release(per / 3)
	killWhen(t, node, devices, "the devices produce", begun, func() (bool, string) {
		n := fleet.ackCount()
		return n >= devices*per/6, fmt.Sprintf("%d readings acknowledged", n)
	})
	fleet.release(2 * per / 3)
	killWhen(t, node, devices, "the transform runs", begun, func() (bool, string) {
		st, err := admin.TransformStatus(ctx, "summarize")
		if err != nil {
			return false, err.Error()
		}
		var out, lag uint64
		for _, p := range st.Partitions {
			out, lag = out+p.RecordsOut, lag+p.Lag
		}
		return out > 0 && lag > 0, fmt.Sprintf("%d summaries appended since the restart, %d readings left", out, lag)
	})
	fleet.release(per)
	killWhen(t, node, devices, "the uplink forwards", begun, func() (bool, string) {
		st, err := admin.UplinkStatus(ctx, "summaries")
		if err != nil {
			return false, err.Error()
		}
		var fwd, lag uint64
		for _, p := range st.Partitions {
			fwd, lag = fwd+p.Forwarded, lag+p.LagRecords
		}
		return fwd > 0 && lag > 0, fmt.Sprintf("%d summaries forwarded since the restart, %d left", fwd, lag)
	})
	fleet.wait(t)
	t.Logf("%v: the devices are done, %d readings acknowledged", time.Since(begun).Round(time.Millisecond), fleet.ackCount())

	// Every stage catches up: the transform's input and the uplink's
	// have no lag left, and the summaries are as many as the readings.
	for deadline := time.Now().Add(safety); ; time.Sleep(10 * time.Millisecond) {
		tr, terr := admin.TransformStatus(ctx, "summarize")
		up, uerr := admin.UplinkStatus(ctx, "summaries")
		caughtUp := terr == nil && uerr == nil && len(tr.Partitions) == parts && len(up.Partitions) == parts
		for _, p := range tr.Partitions {
			caughtUp = caughtUp && p.Lag == 0
		}
		for _, p := range up.Partitions {
			caughtUp = caughtUp && p.LagRecords == 0
		}
		if caughtUp && topicRecords(ctx, t, node, "summaries") == topicRecords(ctx, t, node, "readings") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pipeline did not catch up: transform %+v (%v), uplink %+v (%v)\n%s", tr, terr, up, uerr, node.logs.Tail(20))
		}
	}
	t.Logf("%v: the pipeline caught up", time.Since(begun).Round(time.Millisecond))
	fleet.checkKafka(t, kafka.ListenAddrs(), kafkaTopic)
	t.Logf("%v: Kafka holds every acknowledged reading once, in order", time.Since(begun).Round(time.Millisecond))
}

// TestPipelineCommandsReachTheirDevice: a downlink appends the records of
// a Kafka topic (kfake) to the node's commands topic, which 50 devices
// long-poll, each for its own key (sdk.WithKey), each a named consumer on
// a connection of its own. Commands keyed to three of the devices are
// written in Kafka, before and after a SIGKILL of the node under the
// parked polls. Exactly those three devices receive their commands, each
// command once and in the order written (none again after the restart),
// and no other device's poll is answered at all: not with a record, not
// even empty (their polls wait far longer than the test). The node's
// key-poll metrics show every device parked again after the restart. At
// the end every device reboots (attaches again under its name) and
// receives nothing: what each received was committed, through the kill.
func TestPipelineCommandsReachTheirDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	const (
		devices    = 50
		kafkaTopic = "cloud.commands"
	)
	kafka, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, kafkaTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	seeds := kafka.ListenAddrs()
	bin := buildLedge(t)
	begun := time.Now()
	node := newServedLedge(t, bin, filepath.Join(t.TempDir(), "ledge-data"))
	node.start()
	defer node.checkNoPanic()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := node.dial(ctx)
	defer admin.Close()
	if _, err := admin.CreateTopic(ctx, "commands", sdk.TopicConfig{Partitions: 2, Durability: sdk.DurabilityAlways}); err != nil {
		t.Fatal(err)
	}
	if err := admin.AddDownlink(ctx, "commands", sdk.DownlinkConfig{Seeds: seeds, From: kafkaTopic}); err != nil {
		t.Fatal(err)
	}

	fleet := make([]*commandDevice, devices)
	for i := range fleet {
		name := fmt.Sprintf("device-%02d", i)
		c := node.dial(ctx)
		defer c.Close()
		cons, err := c.NewConsumer(ctx, "commands", sdk.WithConsumerName(name), sdk.WithKey([]byte(name)),
			sdk.WithAutoCommit(sdk.AutoCommitOnDelivery), sdk.WithMaxWait(commandMaxWait))
		if err != nil {
			t.Fatal(err)
		}
		fleet[i] = &commandDevice{name: name, cons: cons}
	}
	var polling sync.WaitGroup
	for _, d := range fleet {
		polling.Go(func() { d.run(ctx) })
	}
	defer polling.Wait()
	defer cancel()
	parked := len(fleet) * 2 // a device's poll parks on both partitions
	awaitParked(t, node, "commands", parked)
	t.Logf("%v: %d devices parked", time.Since(begun).Round(time.Millisecond), devices)

	// Their keys hash to both partitions: device-07 and device-41 to 1,
	// device-22 to 0.
	targets := []*commandDevice{fleet[7], fleet[22], fleet[41]}
	send := func(round int) {
		t.Helper()
		var cmds [][2]string
		for _, d := range targets {
			cmds = append(cmds, [2]string{d.name, fmt.Sprintf("%s command %d", d.name, round)})
		}
		writeCommands(t, seeds, kafkaTopic, cmds)
		for deadline := time.Now().Add(safety); ; time.Sleep(5 * time.Millisecond) {
			done := true
			for _, d := range targets {
				done = done && len(d.received()) >= round
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				st, err := admin.DownlinkStatus(ctx, "commands")
				t.Fatalf("round %d: not every command arrived; downlink %+v (%v)\n%s", round, st, err, node.logs.Tail(20))
			}
		}
		awaitParked(t, node, "commands", parked)
		t.Logf("%v: round %d delivered, every device parked again", time.Since(begun).Round(time.Millisecond), round)
	}
	send(1)
	// The node lists its clients' connections once a second, for its next
	// run to reset them: a device connected in the last second before a
	// crash would otherwise learn of it only when its poll runs out.
	awaitListedPeers(t, node.dir, devices+1, nil)
	node.stop(syscall.SIGKILL)
	t.Logf("%v: killed under %d parked polls", time.Since(begun).Round(time.Millisecond), parked)
	node.start()
	awaitParked(t, node, "commands", parked)
	t.Logf("%v: restarted, every device reconnected and parked", time.Since(begun).Round(time.Millisecond))
	woken := partitionMetric(t, node, "ledge_partition_key_poll_wakeups_total", "commands")
	send(2)
	t.Logf("key poll wake-ups for the %d commands of round 2: %v",
		len(targets), partitionMetric(t, node, "ledge_partition_key_poll_wakeups_total", "commands")-woken)
	cancel()
	polling.Wait()
	t.Logf("%v: the devices stopped", time.Since(begun).Round(time.Millisecond))

	for _, d := range fleet {
		got := d.received()
		var want []string
		if slices.Contains(targets, d) {
			want = []string{d.name + " command 1", d.name + " command 2"}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s received %q, want %q", d.name, got, want)
		}
		// Kafka's default partitioner and the SDK's agree (murmur2), and
		// the downlink keeps Kafka's partition: a device's commands are on
		// the partition its own producer would write its key to.
		home := int32(sdk.KeyHashPartitioner(1).Partition(&sdk.Record{Key: []byte(d.name)}, 2))
		for i, p := range d.parts {
			if p != home {
				t.Errorf("%s: %q on partition %d, its key's is %d", d.name, got[i], p, home)
			}
		}
		if !slices.Contains(targets, d) && d.empty > 0 {
			t.Errorf("%s: %d polls answered with no command: woken for nothing", d.name, d.empty)
		}
	}
	failed := 0
	for _, d := range fleet {
		failed += d.failed
	}
	t.Logf("%v: %d device polls failed with the kill, then reconnected", time.Since(begun).Round(time.Millisecond), failed)

	// Every device reboots: attached again under its name, it resumes
	// from what it committed, through the kill too, and has no command.
	rebootCtx := testContext(t)
	rebooted := node.dial(rebootCtx)
	defer rebooted.Close()
	for _, d := range fleet {
		cons, err := rebooted.NewConsumer(rebootCtx, "commands", sdk.WithConsumerName(d.name), sdk.WithKey([]byte(d.name)),
			sdk.WithAutoCommit(sdk.AutoCommitOnDelivery), sdk.WithMaxWait(0))
		if err != nil {
			t.Fatal(err)
		}
		recs, err := cons.Poll(rebootCtx)
		if err != nil || len(recs) > 0 {
			t.Errorf("%s rebooted: polled %d records (%v), want none", d.name, len(recs), err)
		}
		if err := cons.Close(rebootCtx); err != nil {
			t.Error(err)
		}
	}
	t.Logf("%v: the %d devices rebooted, none received a command again", time.Since(begun).Round(time.Millisecond), devices)
}
