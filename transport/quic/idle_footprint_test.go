package quic

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgemq/ledge/transport/quic/certs"
)

// TestIdleFootprint measures what many idle connections cost a server:
// LEDGE_IDLE_CONNS=1000 go test ./transport/quic -run TestIdleFootprint -v
//
// The devices run in a child process (this test binary again, as
// TestIdleFootprintDevices), so that every goroutine, byte of heap and
// page of resident memory of this process is the server's. Each device
// authenticates, ends its first stream and parks a poll on a second one
// (idleDevice). The figures are per connection: the difference between
// the server before the devices and with all of them parked, after a
// collection; with LEDGE_IDLE_PROFILE=1, the heap by who allocated it
// (runtime.MemProfileRate 1, which inflates the other figures); and the
// resident memory as the set-up left it and once the runtime
// has returned what it could (debug.FreeOSMemory).
//
// LEDGE_IDLE_GOGC sets the collector's percent for the run (the node
// runs at 400); LEDGE_IDLE_SERVER_WINDOWS=small runs with the smallest
// initial windows quic-go accepts, to show they cost nothing at idle;
// LEDGE_IDLE_HEAP_PROFILE=file writes the heap profile with the devices
// parked, for go tool pprof; LEDGE_IDLE_CURVES=x25519 has the server
// choose X25519 alone, without ML-KEM; LEDGE_IDLE_BARE=1 serves the devices with
// quic-go alone (bareServer), the floor.
func TestIdleFootprint(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("LEDGE_IDLE_CONNS"))
	if n <= 0 || testing.Short() {
		t.Skip("set LEDGE_IDLE_CONNS=N to measure a server holding N idle connections")
	}
	if g := os.Getenv("LEDGE_IDLE_GOGC"); g != "" {
		pct, err := strconv.Atoi(g)
		if err != nil {
			t.Fatal(err)
		}
		defer debug.SetGCPercent(debug.SetGCPercent(pct))
	}
	profile := os.Getenv("LEDGE_IDLE_PROFILE") != ""
	if profile {
		// Exact, but it costs memory of its own (a record per live
		// object): the resident figures of such a run are inflated.
		runtime.MemProfileRate = 1
	}
	cfg := Config{
		Authenticate:        acceptToken,
		SourceHandshakeRate: -1,
		MaxConns:            n + 16,
		MaxUnauthenticated:  n + 16,
	}
	if os.Getenv("LEDGE_IDLE_SERVER_WINDOWS") == "small" {
		cfg.InitialStreamReceiveWindow, cfg.InitialConnectionReceiveWindow = minWindow, minWindow
	}
	var curves []tls.CurveID
	if os.Getenv("LEDGE_IDLE_CURVES") == "x25519" {
		curves = []tls.CurveID{tls.X25519}
	}
	ts := newTestServerCurves(t, cfg, curves)
	addr, kind := ts.addr(), "this package's listener"
	settled := func() bool { return ts.ln.Stats().StreamsOpen == int64(n) && ts.ln.Stats().StreamsOpen > 0 }
	if os.Getenv("LEDGE_IDLE_BARE") != "" {
		_ = ts.ln.Close()
		conf := ServerTLSConfig(nil)
		conf.Certificates = []tls.Certificate{ts.eph.Server}
		conf.CurvePreferences = curves
		bs := serveBare(t, enforceTLS(conf))
		addr, kind = bs.addr(), "quic-go alone"
		settled = func() bool { return bs.settled(n) }
	} else {
		ps := serveParked(t, ts)
		inner := settled
		settled = func() bool { return inner() && ps.parked.Load() == int64(n) }
	}
	before := measureMem(t)
	ownersBefore, sitesBefore := heapByOwner()

	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, ts.eph.CA.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	hangUp := startDevices(t, []string{os.Args[0], "-test.run=^TestIdleFootprintDevices$", "-test.v"},
		"LEDGE_IDLE_DEVICES_ADDR="+addr, "LEDGE_IDLE_DEVICES_CA="+ca, "LEDGE_IDLE_DEVICES="+strconv.Itoa(n))
	defer hangUp()
	for !settled() {
		if time.Since(start) > 10*time.Minute {
			t.Fatalf("the %d devices did not settle", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	setUp := time.Since(start)
	rssAsLeft := vmRSS(t)
	after := measureMem(t)
	owners, sites := heapByOwner()
	if path := os.Getenv("LEDGE_IDLE_HEAP_PROFILE"); path != "" {
		writeHeapProfile(t, path)
	}
	census := goroutineCensusAll()
	debug.FreeOSMemory()
	rssFloor := vmRSS(t)

	per := func(a, b uint64) string { return fmt.Sprintf("%.1f KB", float64(int64(a)-int64(b))/float64(n)/1000) }
	t.Logf("%d idle connections to %s, set up in %v (GOGC %d)", n, kind, setUp.Round(time.Millisecond), gcPercent())
	t.Logf("resident, as the set-up left it: %s a connection (%d → %d MB)", per(rssAsLeft, before.rss), before.rss>>20, rssAsLeft>>20)
	t.Logf("resident, after FreeOSMemory:     %s a connection (%d MB)", per(rssFloor, before.rss), rssFloor>>20)
	t.Logf("heap in use after a collection:   %s a connection", per(after.heapInuse, before.heapInuse))
	t.Logf("goroutine stacks:                 %s a connection", per(after.stackInuse, before.stackInuse))
	t.Logf("runtime's memory, all of it:      %s a connection", per(after.sys, before.sys))
	t.Logf("goroutines:                       %.2f a connection (%d → %d): %v",
		float64(after.goroutines-before.goroutines)/float64(n), before.goroutines, after.goroutines, census)
	if !profile {
		return
	}
	var lines []string
	for _, o := range []string{"quic-go", "crypto/tls", "ledge", "other"} {
		lines = append(lines, fmt.Sprintf("%s %.1f KB", o, float64(owners[o]-ownersBefore[o])/float64(n)/1000))
	}
	t.Logf("live heap by owner, a connection: %s", strings.Join(lines, ", "))
	for k := range sites {
		sites[k] -= sitesBefore[k]
	}
	for _, s := range topSites(sites, 25) {
		t.Logf("  %7.0f B  %s", float64(sites[s])/float64(n), s)
	}
}

func writeHeapProfile(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

// newTestServerCurves is newTestServer with the key exchanges the server
// prefers (nil: Go's default).
func newTestServerCurves(t testing.TB, cfg Config, curves []tls.CurveID) *testServer {
	t.Helper()
	eph, err := certs.NewEphemeral("127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	conf := ServerTLSConfig(nil)
	conf.Certificates = []tls.Certificate{eph.Server}
	conf.CurvePreferences = curves
	ln, err := Listen("127.0.0.1:0", conf, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return &testServer{ln: ln, eph: eph}
}

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// goroutineCensusAll counts every goroutine of the process by the
// function it started in, where there are at least ten alike.
func goroutineCensusAll() map[string]int {
	recs := make([]runtime.StackRecord, runtime.NumGoroutine()+64)
	n, _ := runtime.GoroutineProfile(recs)
	out := map[string]int{}
	for _, r := range recs[:n] {
		entry := ""
		frames := runtime.CallersFrames(r.Stack())
		for {
			fr, more := frames.Next()
			if fr.Function != "runtime.goexit" && fr.Function != "" {
				entry = fr.Function
			}
			if !more {
				break
			}
		}
		out[shortFunc(entry)]++
	}
	for k, v := range out {
		if v < 10 {
			delete(out, k)
		}
	}
	return out
}

// TestIdleFootprintDevices is the devices' side of TestIdleFootprint, run
// in a child process: it dials, parks every device's poll, says so on
// stdout, and holds the connections until its stdin closes.
func TestIdleFootprintDevices(t *testing.T) {
	addr := os.Getenv("LEDGE_IDLE_DEVICES_ADDR")
	if addr == "" {
		t.Skip("the devices of TestIdleFootprint")
	}
	n, _ := strconv.Atoi(os.Getenv("LEDGE_IDLE_DEVICES"))
	tlsConf, err := ClientTLSConfigFromCAFile(os.Getenv("LEDGE_IDLE_DEVICES_CA"), "localhost")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const perSocket, dialers = 500, 8
	var transports []*Transport
	for range (n + perSocket - 1) / perSocket {
		tr, err := NewTransport("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		transports = append(transports, tr)
	}
	conns := make([]*ClientConn, n)
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range dialers {
		wg.Go(func() {
			for i := range next {
				c, err := Dial(ctx, addr, tlsConf, ClientConfig{Transport: transports[i/perSocket], HandshakeTimeout: time.Minute})
				if err == nil {
					conns[i] = c
					_, err = idleDevice(ctx, c, i)
				}
				if err != nil {
					mu.Lock()
					firstErr = cmpOr(firstErr, fmt.Errorf("device %d: %w", i, err))
					mu.Unlock()
				}
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
	for _, c := range conns {
		_ = c.Close()
	}
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// startDevices runs args (this test binary, re-run as the devices'
// process) with env added, and returns once it printed "devices ready";
// it fails t if the process printed "devices failed" or ended first.
// hangUp closes the process's standard input, on which the devices hang
// up, and waits for it to end.
func startDevices(t *testing.T, args []string, env ...string) (hangUp func()) {
	t.Helper()
	child := exec.Command(args[0], args[1:]...)
	child.Env = append(os.Environ(), env...)
	stdin, err := child.StdinPipe() // the devices hang up when it closes
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	hangUp = func() { _ = stdin.Close(); _ = child.Wait() }
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "devices ready") || strings.HasPrefix(line, "devices failed") {
				ready <- line
			}
		}
		close(ready)
	}()
	if line := <-ready; !strings.HasPrefix(line, "devices ready") {
		hangUp()
		t.Fatalf("the devices' process: %q", line)
	}
	return hangUp
}
