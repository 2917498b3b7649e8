package quic

import (
	"context"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"
)

// An idle device costs the server the goroutines quic-go's API demands
// and no more: quic-go's two (its connection loop and its send queue),
// the application's stream acceptor, and one reader per stream with a
// request in it (the parked poll's). The transport itself keeps none:
// a connection's set-up goroutine ends once the connection is accepted,
// its end is watched by context.AfterFunc, and an idle stream holds no
// writer. The client holds three a device: quic-go's two and the
// reader of its poll's pipeline (whose writer starts only for frames
// that queue).
func TestAnIdleDeviceCostsTheServerFourGoroutines(t *testing.T) {
	const devices = 20
	var ts *testServer
	var ps *parkedServer
	pprof.Do(context.Background(), pprof.Labels("side", "server"), func(context.Context) {
		ts = newTestServer(t, Config{Authenticate: acceptToken, SourceHandshakeRate: -1})
		ps = serveParked(t, ts)
	})
	before := goroutineCensus(t, "server")
	for before["not started yet"] > 0 {
		runtime.Gosched()
		before = goroutineCensus(t, "server")
	}

	ctx := testContext(t)
	pprof.Do(ctx, pprof.Labels("side", "client"), func(ctx context.Context) {
		tr, err := NewTransport("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Close() })
		for i := range devices {
			c, err := Dial(ctx, ts.addr(), ts.clientTLS(), ClientConfig{Transport: tr})
			if err != nil {
				t.Fatalf("device %d: dial: %v", i, err)
			}
			t.Cleanup(func() { _ = c.Close() })
			if _, err := idleDevice(ctx, c, i); err != nil {
				t.Fatalf("device %d: %v", i, err)
			}
		}
	})

	// Every poll parked, every control stream ended on both sides: the
	// client's reader of a control stream ends when the server's reply
	// has been read, which may be after the server has let go of it.
	// The goroutine that set up the last connection may still be on its
	// way out after the device's poll parked.
	want := censusTotal(before) + 4*devices
	_, trBefore, _ := censusByOwner(before)
	var after, client map[string]int
	for deadline := time.Now().Add(safety); ; {
		after = goroutineCensus(t, "server")
		client = goroutineCensus(t, "client")
		_, tr, _ := censusByOwner(after)
		settled := ps.parked.Load() == devices && ts.ln.Stats().StreamsOpen == devices &&
			censusTotal(client) <= 3*devices+2 && tr <= trBefore
		if settled && censusTotal(after) <= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := ps.parked.Load(); n != devices {
		t.Fatalf("%d polls parked, want %d", n, devices)
	}
	if n := ts.ln.Stats().StreamsOpen; n != devices {
		t.Fatalf("%d streams open on the server, want %d: the control streams should have ended", n, devices)
	}
	q0, tr0, app0 := censusByOwner(before)
	q1, tr1, app1 := censusByOwner(after)
	t.Logf("server goroutines per idle device: quic-go %.2f, transport %.2f, application %.2f; before the devices %v, with them %v",
		float64(q1-q0)/devices, float64(tr1-tr0)/devices, float64(app1-app0)/devices, before, after)
	t.Logf("client goroutines per idle device: %.2f (%v)", float64(censusTotal(client))/devices, client)

	if d := q1 - q0; d > 2*devices {
		t.Errorf("quic-go runs %d goroutines for %d idle connections, want at most 2 each", d, devices)
	}
	// The client: quic-go's two and the poll's reader. The parked poll's
	// frame was small and written by Send itself: no writer goroutine.
	// One socket's reader and send queue are shared by every device.
	if n := censusTotal(client); n > 3*devices+2 {
		t.Errorf("the client runs %d goroutines for %d idle devices on one socket, want at most 3 each and 2 for the socket", n, devices)
	}
	if d := tr1 - tr0; d > 0 {
		t.Errorf("the transport runs %d goroutines for %d idle connections, want none", d, devices)
	}
	if d := app1 - app0; d > 2*devices {
		t.Errorf("the serving loops run %d goroutines for %d idle devices, want 2 each (acceptor, parked reader)", d, devices)
	}
}
