package fleetload

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/sdk"
)

// Twenty devices on a node in this process, each with its own token and
// ten to a command partition: every record is acknowledged, every command
// reaches its device, and a command wakes its device's poll alone, not
// the ten parked on its partition.
func TestLedgeFleetOf20OnANode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for a few seconds of real time")
	}
	dir := t.TempDir()
	n, err := node.Open(t.Context(), node.Config{DataDir: dir, Listen: "127.0.0.1:0", RetentionInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(t.Context())
	admin, err := sdk.Dial(t.Context(), n.Addr(), sdk.WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	sys := &Ledge{Admin: admin, Addr: n.Addr(), Options: []sdk.Option{sdk.WithCAFile(filepath.Join(dir, "tls", "ca.pem"))},
		Durability: sdk.DurabilityNone, Wakeups: func(context.Context) (uint64, error) {
			var woken uint64
			for _, tp := range n.Snapshot(ops.OffsetsOnly).Topics {
				if tp.Name == CmdTopic {
					for _, p := range tp.Parts {
						woken += p.KeyPolls.Woken
					}
				}
			}
			return woken, nil
		}, GC: func(context.Context) (GCStats, error) { return ProcessGC(), nil }}
	res, err := Run(t.Context(), sys, Params{Devices: 20, CmdPartitions: 2, Interval: 200 * time.Millisecond, CmdRate: 20,
		Settle: 300 * time.Millisecond, Duration: 2 * time.Second, Grace: 5 * time.Second}, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Connected != 20 || res.Held != 20 || res.Errors != 0 {
		t.Fatalf("connected %d, held %d, errors %d (%s); want 20, 20, 0", res.Connected, res.Held, res.Errors, res.FirstErr)
	}
	if res.Sent == 0 || res.Records != res.Sent {
		t.Fatalf("%d of %d records acknowledged", res.Records, res.Sent)
	}
	if res.CmdSent == 0 || res.CmdDelivered != res.CmdSent {
		t.Fatalf("%d of %d commands delivered", res.CmdDelivered, res.CmdSent)
	}
	// A device whose poll was not parked when its command came reads it
	// without a wake-up; one woken for every poll of its partition would
	// make 10 a command.
	t.Logf("%d commands, %d wake-ups", res.CmdSent, res.CmdWakeups)
	if w, ok := res.WakeupsPerCommand(); !ok || w > 1.5 {
		t.Fatalf("%d wake-ups for %d commands (%.2f a command, known %v); want at most about 1", res.CmdWakeups, res.CmdSent, w, ok)
	}
	// Every record crosses loopback as a datagram at least, where the
	// machine has UDP counters; the node's collections are read.
	if _, err := ReadUDPCounters(); err == nil {
		if d, ok := res.DatagramsPerRecord(); !ok || d < 1 {
			t.Errorf("%.2f datagrams a record (known %v); want at least 1", d, ok)
		}
	}
	if !res.GCKnown {
		t.Error("the node's collections were not read")
	}
	t.Logf("%d datagrams sent, %d received, %d collections", res.UDP.OutDatagrams, res.UDP.InDatagrams, res.NodeGC.Cycles)
	tokens, err := admin.ListTokens(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) < 20 {
		t.Fatalf("%d tokens, want one per device", len(tokens))
	}
}

// The wake-ups are read from a node's metrics: the commands topic's
// partitions only.
func TestSumWakeupsReadsTheCommandTopicsPartitions(t *testing.T) {
	text := `# HELP ledge_partition_key_poll_wakeups_total Wake-ups.
# TYPE ledge_partition_key_poll_wakeups_total counter
ledge_partition_key_poll_wakeups_total{partition="0",topic="fleet"} 99
ledge_partition_key_poll_wakeups_total{partition="0",topic="fleet-cmd"} 12
ledge_partition_key_poll_wakeups_total{partition="1",topic="fleet-cmd"} 1.5e+06
ledge_partition_key_polls_parked{partition="1",topic="fleet-cmd"} 7
`
	n, err := sumWakeups(strings.NewReader(text))
	if err != nil || n != 1500012 {
		t.Fatalf("sum %d, %v; want 1500012", n, err)
	}
}

// The node's collections are read from its metrics as it exports them:
// one more after a collection.
func TestMetricsGCReadsTheNodesExposition(t *testing.T) {
	srv := httptest.NewServer(ops.NewPromMetrics("test").Handler())
	defer srv.Close()
	read := MetricsGC(strings.TrimPrefix(srv.URL, "http://"))
	a, err := read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	b, err := read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if b.Cycles <= a.Cycles || b.PauseTotal < a.PauseTotal {
		t.Errorf("collections %+v then %+v across one", a, b)
	}
}
