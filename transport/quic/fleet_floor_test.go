//go:build linux

package quic

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"
)

// TestFleetFloor measures what a fleet's exchange costs a server's CPU
// when nothing but the transport serves it: N devices, each a
// connection (500 to a socket, as the fleet workload's), each parking a
// poll on a stream of its own and sending, on another, a request frame
// of the fleet's size about once a second (gaps uniform in 0.8–1.2 s)
// and waiting for a reply of a produce's size:
//
//	GOMAXPROCS=1 LEDGE_FLOOR_DEVICES=5000 LEDGE_FLOOR_SERVER=bare \
//	    LEDGE_FLOOR_DEVICE_CPUS=1 taskset -c 0 \
//	    go test ./transport/quic -run '^TestFleetFloor$' -v -timeout 30m
//
// LEDGE_FLOOR_SERVER chooses the server: bare, quic-go alone (its own
// socket, its defaults, a goroutine reading each stream into a buffer
// of its own and writing the reply), the floor quic-go sets; listener,
// this package's Listener (its socket, budget, frame reader and write
// buffers) answering each request with Reply. The devices run in a
// child process (this test binary again, as TestFleetFloorDevices,
// pinned to LEDGE_FLOOR_DEVICE_CPUS when set), so this process's CPU is
// the server's. LEDGE_FLOOR_SECONDS (default 20) is the measured window,
// after the devices are all up and 5 s more; LEDGE_FLOOR_BYTES (default
// 350: a 256-byte record with its batch and request headers) the
// request frame. Printed: the server process's CPU-seconds (getrusage)
// per 1,000 exchanges over the window, and the machine's UDP datagrams
// sent per exchange (/proc/net/snmp: over loopback, both sides' are
// counted once; read it on a quiet machine). The test asserts nothing:
// it is a measurement, skipped unless LEDGE_FLOOR_DEVICES is set.
func TestFleetFloor(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("LEDGE_FLOOR_DEVICES"))
	if n <= 0 || testing.Short() {
		t.Skip("set LEDGE_FLOOR_DEVICES=N to measure a server's CPU per exchange with N devices")
	}
	window := 20 * time.Second
	if s := os.Getenv("LEDGE_FLOOR_SECONDS"); s != "" {
		sec, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		window = time.Duration(sec) * time.Second
	}
	size := 350
	if s := os.Getenv("LEDGE_FLOOR_BYTES"); s != "" {
		var err error
		if size, err = strconv.Atoi(s); err != nil || size <= headerLen {
			t.Fatalf("LEDGE_FLOOR_BYTES=%q", s)
		}
	}
	var exchanges atomic.Int64
	ts := newTestServer(t, Config{
		Authenticate:        acceptToken,
		SourceHandshakeRate: -1,
		MaxConns:            n + 16,
		MaxUnauthenticated:  n + 16,
	})
	addr, kind := ts.addr(), os.Getenv("LEDGE_FLOOR_SERVER")
	switch kind {
	case "bare":
		_ = ts.ln.Close()
		conf := ServerTLSConfig(nil)
		conf.Certificates = []tls.Certificate{ts.eph.Server}
		addr = serveFloorBare(t, enforceTLS(conf), &exchanges)
	case "listener", "":
		kind = "listener"
		serveFloorListener(t, ts, &exchanges)
	default:
		t.Fatalf("LEDGE_FLOOR_SERVER=%q: bare or listener", kind)
	}

	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, ts.eph.CA.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{os.Args[0], "-test.run=^TestFleetFloorDevices$", "-test.v", "-test.timeout=0"}
	if cpus := os.Getenv("LEDGE_FLOOR_DEVICE_CPUS"); cpus != "" {
		args = append([]string{"taskset", "-c", cpus}, args...)
	}
	start := time.Now()
	hangUp := startDevices(t, args, "LEDGE_FLOOR_DEVICES_ADDR="+addr, "LEDGE_FLOOR_DEVICES_CA="+ca,
		"LEDGE_FLOOR_DEVICES_N="+strconv.Itoa(n), "LEDGE_FLOOR_DEVICES_BYTES="+strconv.Itoa(size), "GOMAXPROCS=")
	defer hangUp()
	setUp := time.Since(start)
	time.Sleep(5 * time.Second) // past the set-up's retransmissions and collections
	cpu0, ex0, udp0 := processCPU(t), exchanges.Load(), udpCounters(t)
	time.Sleep(window)
	cpu1, ex1, udp1 := processCPU(t), exchanges.Load(), udpCounters(t)
	ex := float64(ex1 - ex0)
	if ex == 0 {
		t.Fatal("no exchange in the window")
	}
	t.Logf("%d devices served by %s (GOMAXPROCS %s), set up in %v", n, kind, os.Getenv("GOMAXPROCS"), setUp.Round(time.Millisecond))
	t.Logf("exchanges: %.0f in %v (%.0f a second), %d-byte requests", ex, window, ex/window.Seconds(), size)
	t.Logf("server CPU-s per 1,000 exchanges: %.4f (%.2f CPU-s)", (cpu1-cpu0).Seconds()/ex*1000, (cpu1 - cpu0).Seconds())
	t.Logf("UDP datagrams sent per exchange: %.2f (dropped for a full receive buffer: %d)",
		float64(udp1.out-udp0.out)/ex, udp1.rcvbufErrors-udp0.rcvbufErrors)
}

// floorReply is a reply of a produce reply's size (41 bytes).
var floorReply = frame(strings.Repeat("a", 41-headerLen))

// serveFloorListener answers every request on ts at once, recycling
// its frame as a node does a produce's, and parks polls.
func serveFloorListener(t *testing.T, ts *testServer, exchanges *atomic.Int64) {
	serveParkedWith(t, ts, func(s *Stream, r *Request) {
		f := r.Frame
		_ = s.Reply(r, floorReply)
		RecycleFrame(f)
		exchanges.Add(1)
	})
}

// serveFloorBare serves the devices with quic-go alone and returns its
// address.
func serveFloorBare(t *testing.T, tlsConf *tls.Config, exchanges *atomic.Int64) string {
	ln, err := quicgo.ListenAddr("127.0.0.1:0", tlsConf, &quicgo.Config{MaxIdleTimeout: DefaultMaxIdleTimeout})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		_ = ln.Close()
		wg.Wait()
	})
	stream := func(qc *quicgo.Conn, st *quicgo.Stream) {
		defer st.Close()
		framing := WireFraming()
		buf := make([]byte, 1<<10)
		for {
			if _, err := io.ReadFull(st, buf[:framing.HeaderLen]); err != nil {
				return
			}
			n, err := framing.FrameLen(buf[:framing.HeaderLen])
			if err != nil || n > len(buf) {
				st.CancelRead(1)
				return
			}
			if _, err := io.ReadFull(st, buf[framing.HeaderLen:n]); err != nil {
				return
			}
			switch body := buf[framing.HeaderLen:n]; {
			case string(body) == "poll":
				select { // parked until the server or the connection ends
				case <-ctx.Done():
				case <-qc.Context().Done():
				}
				return
			case strings.HasPrefix(string(body), "token:"):
				_, _ = st.Write(frame("welcome"))
			default:
				_, _ = st.Write(floorReply)
				exchanges.Add(1)
			}
		}
	}
	wg.Go(func() {
		for {
			qc, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			wg.Go(func() {
				defer qc.CloseWithError(0, "")
				for {
					st, err := qc.AcceptStream(ctx)
					if err != nil {
						return
					}
					wg.Go(func() { stream(qc, st) })
				}
			})
		}
	})
	return ln.Addr().String()
}

// TestFleetFloorDevices is the devices' side of TestFleetFloor, run in a
// child process: each device authenticates, parks a poll and then sends
// a request about once a second, waiting for each reply, until stdin
// closes.
func TestFleetFloorDevices(t *testing.T) {
	addr := os.Getenv("LEDGE_FLOOR_DEVICES_ADDR")
	if addr == "" {
		t.Skip("the devices of TestFleetFloor")
	}
	n, _ := strconv.Atoi(os.Getenv("LEDGE_FLOOR_DEVICES_N"))
	size, _ := strconv.Atoi(os.Getenv("LEDGE_FLOOR_DEVICES_BYTES"))
	tlsConf, err := ClientTLSConfigFromCAFile(os.Getenv("LEDGE_FLOOR_DEVICES_CA"), "localhost")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const perSocket, dialers = 500, 32
	var transports []*Transport
	for range (n + perSocket - 1) / perSocket {
		tr, err := NewTransport("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		transports = append(transports, tr)
	}
	request := frame(strings.Repeat("r", size-headerLen))
	conns := make([]*ClientConn, n)
	next := make(chan int)
	var wg, devices sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		firstErr = cmpOr(firstErr, err)
		mu.Unlock()
	}
	for range dialers {
		wg.Go(func() {
			for i := range next {
				dctx, dcancel := context.WithTimeout(ctx, time.Minute)
				c, err := Dial(dctx, addr, tlsConf, ClientConfig{Transport: transports[i/perSocket], HandshakeTimeout: time.Minute})
				var p *Pipeline
				if err == nil {
					conns[i] = c
					if _, err = idleDevice(dctx, c, i); err == nil {
						var s *ClientStream
						if s, err = c.OpenStream(dctx); err == nil {
							p = NewPipeline(s, 1)
						}
					}
				}
				dcancel()
				if err != nil {
					fail(fmt.Errorf("device %d: %w", i, err))
					continue
				}
				devices.Go(func() { floorDevice(ctx, p, request, uint64(i)) })
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		fmt.Printf("devices failed: %v\n", firstErr)
		t.Fatal(firstErr)
	}
	fmt.Println("devices ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString(0) // until the server's test hangs up
	cancel()
	devices.Wait()
	for _, c := range conns {
		_ = c.Close()
	}
}

// floorDevice sends request on p about once a second, each gap uniform
// in 0.8–1.2 s after a random phase, until ctx ends.
func floorDevice(ctx context.Context, p *Pipeline, request []byte, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 20240917))
	wait := time.Duration(rng.Int64N(int64(time.Second)))
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if _, err := p.Do(ctx, request); err != nil {
			return
		}
		wait = 800*time.Millisecond + time.Duration(rng.Int64N(int64(400*time.Millisecond)))
	}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type udpFigures struct{ out, rcvbufErrors uint64 }

// udpCounters reads the machine's UDP counters from /proc/net/snmp.
func udpCounters(t *testing.T) udpFigures {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for line := range strings.SplitSeq(string(b), "\n") {
		fields, ok := strings.CutPrefix(line, "Udp: ")
		if !ok {
			continue
		}
		if names == nil {
			names = strings.Fields(fields)
			continue
		}
		var f udpFigures
		for i, v := range strings.Fields(fields) {
			x, _ := strconv.ParseUint(v, 10, 64)
			switch names[i] {
			case "OutDatagrams":
				f.out = x
			case "RcvbufErrors":
				f.rcvbufErrors = x
			}
		}
		return f
	}
	t.Fatal("no Udp counters in /proc/net/snmp")
	return udpFigures{}
}
