package quic

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// What a server holds for its idle connections, counted the way an
// operator would see it: goroutines by the function they started in,
// heap by the code that allocated it, resident memory from the kernel.
// The helpers serve the goroutine pin (idle_goroutines_test.go) and the
// measurement of many idle connections (idle_footprint_test.go).

// goroutineCensus counts the goroutines carrying the pprof label
// side=value, by the function each started in ("not started yet" for
// those that have not run).
func goroutineCensus(t testing.TB, side string) map[string]int {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	want := fmt.Sprintf(`"side":%q`, side)
	_, records, _ := strings.Cut(buf.String(), "\n") // after the "goroutine profile: total N" line
	for _, rec := range strings.Split(records, "\n\n") {
		lines := strings.Split(strings.TrimSpace(rec), "\n")
		if len(lines) < 2 || !strings.Contains(rec, want) {
			continue
		}
		n, err := strconv.Atoi(strings.Fields(lines[0])[0])
		if err != nil {
			continue // the profile's header
		}
		entry := "not started yet"
		for _, l := range lines[1:] {
			if f := strings.Fields(l); strings.HasPrefix(l, "#\t") && len(f) >= 3 && f[2] != "runtime.goexit" {
				entry = shortFunc(f[2]) // the outermost frame: where the goroutine started
			}
		}
		out[entry] += n
	}
	return out
}

// shortFunc trims a function's module path and its offset.
func shortFunc(f string) string {
	if i := strings.LastIndex(f, "+0x"); i > 0 {
		f = f[:i]
	}
	for _, p := range []string{"github.com/quic-go/quic-go", "github.com/ledgemq/ledge/transport/quic"} {
		if rest, ok := strings.CutPrefix(f, p); ok {
			if p == "github.com/quic-go/quic-go" {
				return "quic-go" + rest
			}
			return "quic" + rest
		}
	}
	return f
}

func censusTotal(c map[string]int) int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// censusByOwner groups a census into quic-go's goroutines, this
// package's, and the application's (the test's serving loops).
func censusByOwner(c map[string]int) (quicgo, transport, app int) {
	for f, n := range c {
		switch {
		case strings.HasPrefix(f, "quic-go"):
			quicgo += n
		case strings.HasPrefix(f, "quic.") && !strings.Contains(f, "Test") && !strings.Contains(f, "serve"):
			transport += n
		default:
			app += n
		}
	}
	return quicgo, transport, app
}

// parkedServer serves like a node whose clients each park a long poll:
// a frame "poll" is held unanswered until the server ends, any other is
// echoed (or given to answer). Every connection has a goroutine
// accepting its streams and every stream one reading it (the node's
// shape: node/server.go).
type parkedServer struct {
	ts     *testServer
	answer handler
	parked atomic.Int64
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func serveParked(t testing.TB, ts *testServer) *parkedServer {
	return serveParkedWith(t, ts, echo)
}

// serveParkedWith is serveParked answering what is not a poll with h.
func serveParkedWith(t testing.TB, ts *testServer, h handler) *parkedServer {
	ps := &parkedServer{ts: ts, answer: h}
	ps.ctx, ps.cancel = context.WithCancel(context.Background())
	t.Cleanup(func() {
		ps.cancel()
		_ = ts.ln.Close()
		ps.wg.Wait()
	})
	ps.wg.Go(func() {
		for {
			c, err := ts.ln.Accept(ps.ctx)
			if err != nil {
				return
			}
			ps.wg.Go(func() { ps.serveConn(c) })
		}
	})
	return ps
}

func (ps *parkedServer) serveConn(c *Conn) {
	for {
		s, err := c.AcceptStream(ps.ctx)
		if err != nil {
			return
		}
		ps.wg.Go(func() { ps.serveStream(c, s) })
	}
}

func (ps *parkedServer) serveStream(c *Conn, s *Stream) {
	defer s.Close()
	for {
		r, err := s.ReadFrame()
		if err != nil {
			return
		}
		if bodyOf(r.Frame) != "poll" {
			ps.answer(s, r)
			continue
		}
		ps.parked.Add(1)
		select { // a parked poll: nothing to answer until the server ends
		case <-ps.ctx.Done():
		case <-c.Context().Done():
		}
		ps.parked.Add(-1)
		r.Release()
		return
	}
}

// acceptToken is an Authenticator taking any frame "token:…".
func acceptToken(_ context.Context, req AuthRequest) (Identity, []byte, error) {
	body := bodyOf(req.Frame)
	tok, ok := strings.CutPrefix(body, "token:")
	if !ok {
		return Identity{}, nil, &CloseError{Code: CodeUnauthenticated, Reason: "no token"}
	}
	return Identity{TokenID: tok}, frame("welcome"), nil
}

// idleDevice does what a device of a fleet does before it goes quiet:
// it authenticates on its first stream, closes that stream once
// answered (as the SDK closes its control stream when no call is in
// flight), and parks a long poll on a stream of its own.
func idleDevice(ctx context.Context, c *ClientConn, i int) (*Pipeline, error) {
	s, err := c.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	control := NewPipeline(s, 1)
	reply, err := control.Do(ctx, frame("token:device-"+strconv.Itoa(i)))
	if err != nil {
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	if got := bodyOf(reply); got != "welcome" {
		return nil, fmt.Errorf("authenticate: got %q", got)
	}
	control.CloseSend()
	s, err = c.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	poll := NewPipeline(s, 1)
	if err := poll.Send(ctx, frame("poll"), func([]byte, error) {}); err != nil {
		return nil, fmt.Errorf("poll: %w", err)
	}
	return poll, nil
}

// memFigures is what a process holds, after a collection.
type memFigures struct {
	rss, heapInuse, stackInuse, sys uint64
	goroutines                      int
}

func measureMem(t testing.TB) memFigures {
	t.Helper()
	runtime.GC()
	runtime.GC() // the heap profile shows the state as of the last completed cycle
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memFigures{
		rss:        vmRSS(t),
		heapInuse:  ms.HeapInuse,
		stackInuse: ms.StackInuse,
		sys:        ms.Sys - ms.HeapReleased,
		goroutines: runtime.NumGoroutine(),
	}
}

// vmRSS is the process's resident memory from /proc/self/status (0
// where there is none).
func vmRSS(t testing.TB) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	return 0
}

// heapOwner names who allocated a live heap object: the innermost frame
// of its allocation's stack that belongs to crypto/tls, quic-go, or this
// module; the rest is "other" (the runtime and the standard library on
// their own).
func heapOwner(stack []uintptr) (owner, site string) {
	frames := runtime.CallersFrames(stack)
	for {
		fr, more := frames.Next()
		fn := fr.Function
		switch {
		case strings.HasPrefix(fn, "crypto/tls."):
			return "crypto/tls", shortFunc(fn)
		case strings.HasPrefix(fn, "github.com/quic-go/quic-go"):
			return "quic-go", shortFunc(fn)
		case strings.HasPrefix(fn, "github.com/ledgemq/ledge/"):
			return "ledge", shortFunc(fn)
		}
		if !more {
			return "other", shortFunc(fn)
		}
	}
}

// heapByOwner sums the live heap (as of the last collection) by owner
// and by allocation site. It is exact only with runtime.MemProfileRate
// at 1 from before the allocations.
func heapByOwner() (owners, sites map[string]int64) {
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, false)
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, false); ok {
			recs = recs[:n]
			break
		}
	}
	owners, sites = map[string]int64{}, map[string]int64{}
	for _, r := range recs {
		owner, site := heapOwner(r.Stack())
		owners[owner] += r.InUseBytes()
		sites[owner+" "+site] += r.InUseBytes()
	}
	return owners, sites
}

// topSites returns the n largest entries of m, largest first.
func topSites(m map[string]int64, n int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return int(m[b] - m[a]) })
	return keys[:min(n, len(keys))]
}
