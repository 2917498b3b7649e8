package plugins

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgemq/ledge/internal/testtool"
	"github.com/ledgemq/ledge/plugins/abi"
	"github.com/ledgemq/ledge/record"
)

// Test modules built once per test binary: the Go examples and the hostile
// plugin with the Go toolchain (its build cache keeps this fast), the WAT
// example with wat2wasm when it is installed.
var testModules struct {
	dir      string
	cacheDir string // the wazero compilation cache, kept across runs
	once     sync.Map
}

var keepCache = flag.Bool("plugins.keepcache", true, "keep the wazero compilation cache of tests across runs")

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "ledge-plugins-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testModules.dir = dir
	testModules.cacheDir = filepath.Join(dir, "wazero")
	if *keepCache {
		if ucd, err := os.UserCacheDir(); err == nil {
			testModules.cacheDir = filepath.Join(ucd, "ledge", "plugins-test-wazero")
			pruneCache(testModules.cacheDir, 7*24*time.Hour)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// pruneCache removes compiled modules not written for a while: every
// change to a test module or to the metering leaves a stale entry.
func pruneCache(dir string, age time.Duration) {
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil && time.Since(info.ModTime()) > age {
			os.Remove(path)
		}
		return nil
	})
}

type builtModule struct {
	wasm []byte
	err  error
}

// goModule builds the Go plugin in pkg (relative to this package) for
// wasip1 and returns its bytes.
func goModule(t testing.TB, pkg string) []byte {
	t.Helper()
	v, _ := testModules.once.LoadOrStore("once:"+pkg, &sync.Once{})
	key := "mod:" + pkg
	v.(*sync.Once).Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			testModules.once.Store(key, builtModule{err: fmt.Errorf("no go toolchain: %w", err)})
			return
		}
		out := filepath.Join(testModules.dir, strings.ReplaceAll(pkg, "/", "_")+".wasm")
		cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			testModules.once.Store(key, builtModule{err: fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)})
			return
		}
		b, err := os.ReadFile(out)
		testModules.once.Store(key, builtModule{wasm: b, err: err})
	})
	r, _ := testModules.once.Load(key)
	bm := r.(builtModule)
	if bm.err != nil {
		t.Fatal(bm.err)
	}
	return bm.wasm
}

// watModule assembles a WAT file with wat2wasm, skipping the test when the
// tool is not installed.
func watModule(t testing.TB, path string) []byte {
	t.Helper()
	bin := testtool.Need(t, "Debian: apt-get install wabt (the WebAssembly text example "+path+")", "wat2wasm")
	out := filepath.Join(t.TempDir(), "out.wasm")
	if msg, err := exec.Command(bin, path, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm %s: %v\n%s", path, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	jsonFilterPkg = "../sdk/plugin/examples/jsonfilter"
	samplePkg     = "../sdk/plugin/examples/sample"
	checkpointPkg = "../sdk/plugin/examples/checkpoint"
	hostilePkg    = "./testdata/hostile"
	prefixWAT     = "../sdk/plugin/examples/watfilter/prefix.wat"
)

// testClock is a clock tests move by hand. Deadlines are measured on it,
// so a guest's call times out exactly when the test says.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// logSink collects the host's log records and lets a test wait for one.
type logSink struct {
	mu      sync.Mutex
	records []string
	waiters map[string]chan struct{}
}

func (s *logSink) handler() slog.Handler { return &sinkHandler{s: s} }

// wait returns a channel closed when a record containing substr is logged
// after the call.
func (s *logSink) wait(substr string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiters == nil {
		s.waiters = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	s.waiters[substr] = ch
	return ch
}

func (s *logSink) all() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.records, "\n")
}

type sinkHandler struct {
	s     *logSink
	attrs []slog.Attr
}

func (h *sinkHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *sinkHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	line := b.String()
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	h.s.records = append(h.s.records, line)
	for substr, ch := range h.s.waiters {
		if strings.Contains(line, substr) {
			close(ch)
			delete(h.s.waiters, substr)
		}
	}
	return nil
}
func (h *sinkHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &sinkHandler{s: h.s, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}
func (h *sinkHandler) WithGroup(string) slog.Handler { return h }

// newTestHost returns a host with the shared compilation cache, a test
// clock and a discarding logger unless cfg sets its own.
func newTestHost(t testing.TB, cfg Config) *Host {
	t.Helper()
	if cfg.CacheDir == "" {
		cfg.CacheDir = testModules.cacheDir
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = newTestClock().Now
	}
	if cfg.CompileTimeout == 0 {
		cfg.CompileTimeout = 10 * time.Minute // a first compile under -race is slow
	}
	cfg.Seed = [32]byte{1}
	h, err := NewHost(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

func mustAdd(t testing.TB, h *Host, name string, kind Kind, wasm []byte) {
	t.Helper()
	if _, err := h.Add(context.Background(), name, kind, wasm); err != nil {
		t.Fatal(err)
	}
}

// testRecord is a record to put in a batch.
type testRecord struct {
	key, value string
	headers    map[string]string
}

// batchOf builds a stored batch holding values at offsets base, base+1, ...
func batchOf(t testing.TB, base uint64, recs ...testRecord) []byte {
	t.Helper()
	var b record.BatchBuilder
	for i, r := range recs {
		rec := record.Record{Timestamp: 1700000000000 + int64(i), Value: []byte(r.value)}
		if r.key != "" {
			rec.Key = []byte(r.key)
		}
		for k, v := range r.headers {
			rec.Headers = append(rec.Headers, record.Header{Key: k, Value: []byte(v)})
		}
		b.Append(rec)
	}
	batch, err := b.Build(record.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	record.StampBaseOffset(batch, base)
	return batch
}

func values(vs ...string) []testRecord {
	out := make([]testRecord, len(vs))
	for i, v := range vs {
		out[i] = testRecord{value: v}
	}
	return out
}

// testView prepares a view of batches read from position from.
func testView(t testing.TB, from uint64, batches ...[]byte) *View {
	t.Helper()
	v, err := NewView(PollResult{Topic: "sensors", Partition: 3, From: from, Batches: batches})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func keptIndexes(m Bitmap) []int {
	var out []int
	for i := 0; i < m.Len(); i++ {
		if m.Kept(i) {
			out = append(out, i)
		}
	}
	return out
}

func slogNew(s *logSink) *slog.Logger { return slog.New(s.handler()) }

func newBitmapAll(n int) Bitmap {
	m := abi.NewBitmap(n)
	m.KeepAll()
	return m
}
