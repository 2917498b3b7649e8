package node

import (
	"bytes"
	"context"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// A device that has closed its control stream and parked a long poll
// costs the node four goroutines: quic-go's two (its connection loop
// and its send queue), the connection's stream acceptor, and the poll
// stream's reader, in which the parked poll waits. No writer, no
// watcher, no goroutine of the poll's own: at 5,000 devices each one
// more is 5,000 goroutines and their stacks. The node's goroutines are
// told from the devices' by a pprof label set when the node starts.
func TestAnIdleDeviceCostsTheNodeFourGoroutines(t *testing.T) {
	const devices = 20
	var tn *testNode
	pprof.Do(context.Background(), pprof.Labels("side", "node"), func(context.Context) {
		tn = startNode(t, nil, nil)
	})
	admin := tn.mustDial(t, tn.admin)
	admin.createTopic("commands", wire.TopicConfig{Partitions: 1})
	admin.main.CloseSend()
	before := nodeGoroutines(t)

	for range devices {
		c := tn.mustDial(t, tn.admin)
		c.main.CloseSend() // as the SDK closes its control stream when no call is in flight
		c.send(c.stream(), &wire.PollRequest{
			Consumer: wire.Consumer{Kind: wire.ConsumerAnonymous},
			MaxWait:  time.Hour,
			Partitions: []wire.PollPartition{{
				Topic: "commands", Position: wire.Position{Mode: wire.PositionEnd},
			}},
		})
	}

	want := before + 4*devices
	var after int
	for deadline := time.Now().Add(20 * time.Second); ; {
		after = nodeGoroutines(t)
		if tn.ParkedPolls() == devices && after <= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := tn.ParkedPolls(); n != devices {
		t.Fatalf("%d polls parked, want %d", n, devices)
	}
	t.Logf("node goroutines: %d before the devices, %d with %d idle devices (%.2f a device)",
		before, after, devices, float64(after-before)/devices)
	if after > want {
		t.Errorf("the node runs %d goroutines for %d idle devices, want at most 4 each:\n%s",
			after-before, devices, nodeGoroutineProfile(t))
	}
}

// nodeGoroutines counts the goroutines labelled side=node, once every
// one of them has started.
func nodeGoroutines(t *testing.T) int {
	t.Helper()
	for {
		n, unstarted := 0, false
		for _, rec := range strings.Split(nodeGoroutineProfile(t), "\n\n") {
			lines := strings.Split(strings.TrimSpace(rec), "\n")
			if len(lines) < 2 || !strings.Contains(rec, `"side":"node"`) {
				continue
			}
			c, err := strconv.Atoi(strings.Fields(lines[0])[0])
			if err != nil {
				continue
			}
			n += c
			unstarted = unstarted || !strings.Contains(rec, "#\t0x")
		}
		if !unstarted {
			return n
		}
		runtime.Gosched()
	}
}

func nodeGoroutineProfile(t *testing.T) string {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	_, records, _ := strings.Cut(buf.String(), "\n") // after "goroutine profile: total N"
	return records
}
