package node

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

// TestE2ESigtermDuringProduce stops `ledge serve` with SIGTERM while a
// producer pipelines batches to a topic with durability always. Every
// request sent gets an answer: an acknowledgement or an error at the
// client, none hangs. The node exits cleanly, and after a restart every
// acknowledged record is readable at the offsets its acknowledgement
// gave.
func TestE2ESigtermDuringProduce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	bin := buildLedge(t)
	dir := filepath.Join(t.TempDir(), "data")
	srv := startServe(t, bin, dir)
	caFile, admin := servedCredentials(t, dir)
	c, err := dialNode(t, srv.addr, caFile, admin)
	if err != nil {
		t.Fatal(err)
	}
	c.createTopic("graceful", wire.TopicConfig{Durability: wire.DurabilityAlways})
	var id wire.InitProducerReply
	c.mustCall(&wire.InitProducerRequest{Name: "stopper"}, &id)

	const perBatch, stopAfter = 4, 50
	type outcome struct {
		batch      int
		ok         bool
		base, last uint64
		err        string
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		answered sync.WaitGroup
	)
	enough := make(chan struct{})
	stream := c.stream()
	sent := make(chan int, 1)
	go func() {
		i := 0
		defer func() { sent <- i }()
		for ; ; i++ {
			vals := make([]string, perBatch)
			for r := range vals {
				vals[r] = fmt.Sprintf("b%05d-r%d", i, r)
			}
			b := batch(t, id.ProducerID, id.ProducerEpoch, int32(i*perBatch), vals...)
			batchNo := i
			answered.Add(1)
			err := stream.Send(safetyContext(t), c.frame(&wire.ProduceRequest{Topic: "graceful", Batch: b}), func(f []byte, err error) {
				defer answered.Done()
				o := outcome{batch: batchNo}
				var rep wire.ProduceReply
				if err == nil {
					err = decodeReply(f, &rep)
				}
				if err == nil {
					o.ok, o.base, o.last = true, rep.BaseOffset, rep.LastOffset
				} else {
					o.err = err.Error()
				}
				mu.Lock()
				outcomes = append(outcomes, o)
				if n := len(outcomes); n == stopAfter {
					close(enough)
				}
				mu.Unlock()
			})
			if err != nil {
				answered.Done() // never sent: nothing to answer
				return
			}
		}
	}()
	select {
	case <-enough:
	case <-safetyContext(t).Done():
		t.Fatal("the producer got no answers")
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-srv.exited; err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("ledge serve exited with %v after SIGTERM\n%s", err, srv.stderr)
		}
		t.Fatal(err)
	}
	// The node is gone: the client learns it at once rather than at its
	// idle timeout, and every request still waiting fails.
	_ = c.conn.Close()
	n := <-sent
	answered.Wait()

	mu.Lock()
	got := append([]outcome(nil), outcomes...)
	mu.Unlock()
	var acked, failed int
	for _, o := range got {
		if o.ok {
			acked++
		} else {
			failed++
		}
	}
	if len(got) != n {
		t.Fatalf("%d requests sent, %d answered", n, len(got))
	}
	t.Logf("%d batches sent: %d acknowledged, %d failed at the client", n, acked, failed)

	// Restart and read everything back.
	srv2 := startServe(t, bin, dir)
	r, err := dialNode(t, srv2.addr, caFile, admin)
	if err != nil {
		t.Fatal(err)
	}
	var st wire.GetPartitionStateReply
	r.mustCall(&wire.GetPartitionStateRequest{Topic: "graceful"}, &st)
	byOffset := map[uint64]string{}
	for next := st.Partitions[0].StartOffset; next < st.Partitions[0].HighWatermark; {
		p := r.pollOne(r.main, wire.Consumer{}, "graceful", wire.Position{Mode: wire.PositionOffset, Offset: next}, 0)
		if p.Status != wire.StatusOK {
			t.Fatalf("poll at %d: %s %s", next, p.Status, p.Message)
		}
		for _, v := range values(t, p.Batches) {
			var off uint64
			var val string
			if _, err := fmt.Sscanf(v, "%d:%s", &off, &val); err != nil {
				t.Fatal(err)
			}
			byOffset[off] = val
		}
		if p.Next <= next {
			t.Fatalf("poll at %d made no progress", next)
		}
		next = p.Next
	}
	for _, o := range got {
		if !o.ok {
			continue
		}
		for r := range perBatch {
			want := fmt.Sprintf("b%05d-r%d", o.batch, r)
			if have := byOffset[o.base+uint64(r)]; have != want {
				t.Fatalf("acknowledged record %s at offset %d: found %q after the restart", want, o.base+uint64(r), have)
			}
		}
	}
	if err := srv2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-srv2.exited; err != nil {
		t.Fatalf("ledge serve exited with %v after SIGTERM\n%s", err, srv2.stderr)
	}
}
