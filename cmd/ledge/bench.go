package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/ledgemq/ledge/internal/quicceiling"
	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
	"github.com/spf13/cobra"
)

// benchFlags are the parameters of a benchmark run; they are printed with
// its results.
type benchFlags struct {
	size        int
	batch       int
	inFlight    int
	count       int
	duration    time.Duration
	partitions  int
	durability  string
	compression string
	linger      time.Duration
	topic       string
	logSize     string
	pollBytes   string
	pollBytesN  int // pollBytes, parsed by checkBenchFlags
	batchBytes  string
	batchBytesN int // batchBytes, parsed by checkBenchFlags (0: the SDK's)
	flightBytes string
	flightByteN int // flightBytes, parsed by checkBenchFlags (0: the SDK's)
	jsonOut     bool
	ceiling     time.Duration
	seed        uint64
	cpuProfile  string
}

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure produce and consume throughput and latency through the SDK",
		Long: `Measure what the Go SDK gets from a node, beside the raw quic-go ceiling of
this machine measured in the same run (one stream on loopback, 1 KiB
writes through a buffered writer): the ratio says how much of the
transport's capacity Ledge delivers.

Without --server (or LEDGE_SERVER), the benchmark starts a node in this
process on a temporary data directory and removes it afterwards.`,
		Example: `  ledge bench produce
  ledge bench produce --size 1024 --batch 100 --in-flight 500 --durability none --duration 20s
  ledge bench consume --log-size 1GiB --json
  ledge bench produce --server 10.0.0.5:7420 --ca ca.pem --token "$TOKEN" --partitions 4`,
	}
	cf := addClientFlags(cmd)
	var f benchFlags
	fs := cmd.PersistentFlags()
	fs.IntVar(&f.size, "size", 1024, "message size in bytes")
	fs.IntVar(&f.batch, "batch", sdk.DefaultMaxBatchRecords, "records per batch at most")
	fs.IntVar(&f.inFlight, "in-flight", sdk.DefaultMaxInFlight, "records in flight per partition")
	fs.StringVar(&f.batchBytes, "batch-bytes", "", "bytes per batch at most (default: the SDK's, 1MiB; a larger record goes alone)")
	fs.StringVar(&f.flightBytes, "in-flight-bytes", "", "batch bytes in flight per partition (default: the SDK's, 8MiB)")
	fs.IntVar(&f.count, "count", 0, "messages to send (produce) or to preload and read (consume); 0: --duration or --log-size decides")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "how long produce runs when --count is 0")
	fs.IntVar(&f.partitions, "partitions", 1, "partitions of the benchmark topic")
	fs.StringVar(&f.durability, "durability", "none", "durability of the benchmark topic: always, interval or none")
	fs.StringVar(&f.compression, "compression", "none", "producer compression: none, s2 or zstd")
	fs.DurationVar(&f.linger, "linger", 0, "producer linger")
	fs.StringVar(&f.topic, "topic", "", "topic to use (default: a new bench-<random> topic, deleted afterwards)")
	fs.StringVar(&f.logSize, "log-size", "256MiB", "consume: size of the log to preload and read when --count is 0")
	fs.StringVar(&f.pollBytes, "poll-bytes", "", "consume: bytes per poll at most (default: the SDK's, 4MiB)")
	fs.BoolVar(&f.jsonOut, "json", false, "print the results as JSON")
	fs.DurationVar(&f.ceiling, "ceiling-duration", 2*time.Second, "how long to measure the raw quic-go ceiling, before and again after the run (0 skips it)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the payloads")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured run (client and in-process node) to this file")
	cmd.AddCommand(newBenchProduceCommand(cf, &f), newBenchConsumeCommand(cf, &f), newBenchFleetCommand(cf, &f))
	return cmd
}

// benchEnv is a client to a node, in this process or not, and a topic.
type benchEnv struct {
	client  *sdk.Client
	node    *node.Node
	dir     string
	topic   string
	created bool
	where   string
}

// openBench connects to --server, or starts a node on a temporary
// directory, and creates the benchmark topic.
func openBench(ctx context.Context, cf *clientFlags, f *benchFlags, stderr io.Writer) (*benchEnv, error) {
	env := &benchEnv{}
	if cf.server == "" && os.Getenv(envServer) == "" {
		dir, err := os.MkdirTemp("", "ledge-bench-")
		if err != nil {
			return nil, err
		}
		env.dir = dir
		n, err := node.Open(ctx, node.Config{
			DataDir: dir, Listen: "127.0.0.1:0", RetentionInterval: -1,
			Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("start a node: %w", err)
		}
		env.node = n
		env.where = "in-process node on " + n.Addr()
		c, err := sdk.Dial(ctx, n.Addr(), sdk.WithDataDir(dir))
		if err != nil {
			env.close()
			return nil, err
		}
		env.client = c
	} else {
		c, err := cf.dial(ctx)
		if err != nil {
			return nil, err
		}
		env.client = c
		env.where = "node at " + c.Addr()
	}
	env.topic = f.topic
	if env.topic == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		env.topic = "bench-" + hex.EncodeToString(b[:])
		tf := topicCreateFlags{partitions: f.partitions, durability: f.durability, compression: "none",
			timestamps: "producer", retentionAge: "0", retentionBytes: "0", segmentBytes: "0", segmentAge: "0", maxBatchBytes: "0"}
		cfg, err := tf.config()
		if err != nil {
			env.close()
			return nil, err
		}
		if _, err := env.client.CreateTopic(ctx, env.topic, cfg); err != nil {
			env.close()
			return nil, err
		}
		env.created = true
	}
	return env, nil
}

func (e *benchEnv) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if e.client != nil {
		if e.created && e.node == nil {
			_ = e.client.DeleteTopic(ctx, e.topic)
		}
		_ = e.client.Close()
	}
	if e.node != nil {
		_ = e.node.Close(ctx)
	}
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
}

// startProfile starts a CPU profile when --cpuprofile is set; the returned
// function stops it.
func startProfile(f *benchFlags) (func(), error) {
	if f.cpuProfile == "" {
		return func() {}, nil
	}
	out, err := os.Create(f.cpuProfile)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = out.Close() }, nil
}

// payloads returns n seeded random payloads of size bytes, reused round-robin.
func payloads(seed uint64, size, n int) [][]byte {
	rng := mrand.New(mrand.NewPCG(seed, 0x6c65646765))
	out := make([][]byte, n)
	for i := range out {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		out[i] = b
	}
	return out
}

// benchResult is what a run measured.
type benchResult struct {
	Mode       string         `json:"mode"`
	Target     string         `json:"target"`
	Params     map[string]any `json:"params"`
	Messages   int64          `json:"messages"`
	Bytes      int64          `json:"bytes"`
	Seconds    float64        `json:"seconds"`
	MsgsPerSec float64        `json:"messages_per_sec"`
	MBPerSec   float64        `json:"mb_per_sec"`
	// Latency is per record for produce (Produce to acknowledgement) and
	// per poll for consume, in milliseconds.
	LatencyOf string  `json:"latency_of"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	P999ms    float64 `json:"p999_ms"`
	MaxMs     float64 `json:"max_ms"`
	Errors    int64   `json:"errors"`
	// CPUSeconds is the CPU time (user and system) of this process during
	// the measured run: the client, and the node when it runs in this
	// process. CPUSecondsPerGB relates it to the payload bytes moved; a
	// loaded machine slows a run down but barely changes this figure.
	CPUSeconds      float64 `json:"cpu_seconds,omitempty"`
	CPUSecondsPerGB float64 `json:"cpu_seconds_per_gb,omitempty"`
	// Ceiling is the raw quic-go stream measured in the same run.
	Ceiling *ceilingJSON `json:"ceiling,omitempty"`
	// Write is what writing new data into the page cache of the node's
	// file system cost, measured after a produce run (in-process node
	// only); Bound is what the stream and those writes allow together.
	Write *writeCeiling `json:"page_cache_write,omitempty"`
	Bound *boundJSON    `json:"stream_and_write_bound,omitempty"`
}

// boundJSON is the fastest a produce could go if it cost no more than the
// raw stream plus writing its bytes into the page cache, on as many CPUs
// as the stream kept busy: R / (1 + w·R/U) for the stream's R bytes/s
// with U CPUs busy, and w CPU-seconds per byte written. The write cost is
// that of new pages, measured after the run; a run that finds pages
// freed shortly before (a previous run's log, removed) pays less for
// them, and can pass the bound.
type boundJSON struct {
	MBPerSec float64 `json:"mb_per_sec"`
	Ratio    float64 `json:"ratio_bytes_per_sec"`
}

type ceilingJSON struct {
	MessageSize     int     `json:"message_size"`
	MsgsPerSec      float64 `json:"messages_per_sec"`
	MBPerSec        float64 `json:"mb_per_sec"`
	RatioMsgsPerSec float64 `json:"ratio_messages_per_sec"`
	RatioBytes      float64 `json:"ratio_bytes_per_sec"`
	// Samples are the messages/s of each measurement (before, after).
	Samples []float64 `json:"samples_messages_per_sec"`
	// CPUSecondsPerGB is this process's CPU per GB the stream moved, and
	// CPUsBusy its CPU-seconds per second (sender and receiver together).
	CPUSecondsPerGB float64 `json:"cpu_seconds_per_gb,omitempty"`
	CPUsBusy        float64 `json:"cpus_busy,omitempty"`
}

func newLatencyHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3) // microseconds
}

func (r *benchResult) fill(h *hdrhistogram.Histogram, elapsed time.Duration) {
	r.Seconds = elapsed.Seconds()
	if r.Seconds > 0 {
		r.MsgsPerSec = float64(r.Messages) / r.Seconds
		r.MBPerSec = float64(r.Bytes) / r.Seconds / 1e6
	}
	ms := func(us int64) float64 { return float64(us) / 1e3 }
	r.P50ms = ms(h.ValueAtQuantile(50))
	r.P99ms = ms(h.ValueAtQuantile(99))
	r.P999ms = ms(h.ValueAtQuantile(99.9))
	r.MaxMs = ms(h.Max())
}

// cpuMeter measures this process's CPU time over a run.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuMeter {
	d, ok := processCPU()
	return cpuMeter{start: d, ok: ok}
}

// used returns the CPU seconds used since startCPU (0 when unknown).
func (m cpuMeter) used() float64 {
	d, ok := processCPU()
	if !m.ok || !ok {
		return 0
	}
	return (d - m.start).Seconds()
}

// setCPU records the CPU seconds of the run; call it after r.Bytes is set.
func (r *benchResult) setCPU(seconds float64) {
	r.CPUSeconds = seconds
	if seconds > 0 && r.Bytes > 0 {
		r.CPUSecondsPerGB = seconds / (float64(r.Bytes) / 1e9)
	}
}

// measuredCeiling is one measurement of the raw stream, with the CPU this
// process spent on it.
type measuredCeiling struct {
	quicceiling.Result
	cpuSeconds float64
}

// rawCeiling measures the raw quic-go stream for d (nothing when d is 0).
func rawCeiling(ctx context.Context, d time.Duration) (*measuredCeiling, error) {
	if d <= 0 {
		return nil, nil
	}
	cpu := startCPU()
	c, err := quicceiling.Measure(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("raw quic-go ceiling: %w", err)
	}
	return &measuredCeiling{Result: c, cpuSeconds: cpu.used()}, nil
}

// relate sets r's ceiling to the mean of the measurements taken before and
// after the run (the load of a shared machine drifts), and r's ratio to it.
func (r *benchResult) relate(before, after *measuredCeiling) {
	var cs []*measuredCeiling
	for _, c := range []*measuredCeiling{before, after} {
		if c != nil {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return
	}
	cj := &ceilingJSON{MessageSize: cs[0].MessageSize}
	var cpu, bytes, secs float64
	for _, c := range cs {
		cj.MsgsPerSec += c.MessagesPerSec / float64(len(cs))
		cj.MBPerSec += c.BytesPerSec / 1e6 / float64(len(cs))
		cj.Samples = append(cj.Samples, c.MessagesPerSec)
		cpu, bytes, secs = cpu+c.cpuSeconds, bytes+float64(c.Bytes), secs+c.Elapsed.Seconds()
	}
	if cpu > 0 && bytes > 0 && secs > 0 {
		cj.CPUSecondsPerGB = cpu / (bytes / 1e9)
		cj.CPUsBusy = cpu / secs
	}
	if cj.MsgsPerSec > 0 {
		cj.RatioMsgsPerSec = r.MsgsPerSec / cj.MsgsPerSec
	}
	if cj.MBPerSec > 0 {
		cj.RatioBytes = r.MBPerSec / cj.MBPerSec
	}
	r.Ceiling = cj
	r.bound()
}

// bound relates the run to what the stream and the page-cache writes
// allow together, once both are measured.
func (r *benchResult) bound() {
	c, w := r.Ceiling, r.Write
	if c == nil || w == nil || c.CPUsBusy <= 0 || w.CPUSecondsPerGB <= 0 {
		return
	}
	perMB := w.CPUSecondsPerGB / 1e3 // CPU-seconds per MB written
	b := &boundJSON{MBPerSec: c.MBPerSec / (1 + perMB*c.MBPerSec/c.CPUsBusy)}
	if b.MBPerSec > 0 {
		b.Ratio = r.MBPerSec / b.MBPerSec
	}
	r.Bound = b
}

func (r *benchResult) print(w io.Writer, asJSON bool) error {
	if asJSON {
		return writeJSON(w, r)
	}
	var params []string
	for _, k := range []string{"size", "batch", "in_flight", "partitions", "durability", "compression", "linger", "topic"} {
		if v, ok := r.Params[k]; ok {
			params = append(params, fmt.Sprintf("%s=%v", k, v))
		}
	}
	fmt.Fprintf(w, "%s against %s\n  %s\n", r.Mode, r.Target, strings.Join(params, " "))
	fmt.Fprintf(w, "  %d messages, %s in %.2f s\n", r.Messages, formatBytes(r.Bytes), r.Seconds)
	fmt.Fprintf(w, "  %.0f msgs/s, %.1f MB/s\n", r.MsgsPerSec, r.MBPerSec)
	fmt.Fprintf(w, "  latency (%s): p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, max %.3f ms\n",
		r.LatencyOf, r.P50ms, r.P99ms, r.P999ms, r.MaxMs)
	if r.Errors > 0 {
		fmt.Fprintf(w, "  %d errors\n", r.Errors)
	}
	if r.CPUSeconds > 0 {
		fmt.Fprintf(w, "  CPU: %.2f s in this process (client and in-process node), %.2f s per GB of payload\n",
			r.CPUSeconds, r.CPUSecondsPerGB)
	}
	if c := r.Ceiling; c != nil {
		fmt.Fprintf(w, "  raw quic-go ceiling (1 stream, %d B writes, loopback, mean of before and after): %.0f msgs/s, %.1f MB/s\n",
			c.MessageSize, c.MsgsPerSec, c.MBPerSec)
		fmt.Fprintf(w, "  ratio to the ceiling: %.0f%% of its messages/s, %.0f%% of its bytes/s\n",
			100*c.RatioMsgsPerSec, 100*c.RatioBytes)
		if c.CPUsBusy > 0 {
			fmt.Fprintf(w, "  the stream's CPU: %.2f s per GB, %.2f CPUs busy\n", c.CPUSecondsPerGB, c.CPUsBusy)
		}
	}
	if wc := r.Write; wc != nil {
		fmt.Fprintf(w, "  writing new data into the page cache (%s in 1 MiB writes to a new file beside the log, after the run): %.1f MB/s, %.2f CPU-s per GB\n",
			formatBytes(wc.Bytes), wc.MBPerSec, wc.CPUSecondsPerGB)
	}
	if b := r.Bound; b != nil {
		fmt.Fprintf(w, "  stream and page-cache writes together, on the CPUs the stream kept busy: %.1f MB/s; the run moved %.0f%% of it (over 100%%: the run found pages freed shortly before, which cost less)\n",
			b.MBPerSec, 100*b.Ratio)
	}
	return nil
}

// progress prints a progress line to w about once a second until stop.
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time
	last  time.Time
	lastN int64
}

func newProgress(w io.Writer) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = isTerminal(f)
	}
	now := time.Now()
	return &progress{w: w, tty: tty, start: now, last: now}
}

func (p *progress) tick(what string, n, bytes int64) {
	now := time.Now()
	if now.Sub(p.last) < time.Second {
		return
	}
	rate := float64(n-p.lastN) / now.Sub(p.last).Seconds()
	p.last, p.lastN = now, n
	line := fmt.Sprintf("%6.1fs  %d %s  %.0f msgs/s  %s", now.Sub(p.start).Seconds(), n, what, rate, formatBytes(bytes))
	if p.tty {
		fmt.Fprintf(p.w, "\r%-78s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *progress) done() {
	if p.tty {
		fmt.Fprintf(p.w, "\r%-78s\r", "")
	}
}

func benchParams(f *benchFlags, topic string) map[string]any {
	return map[string]any{
		"size": f.size, "batch": f.batch, "in_flight": f.inFlight, "partitions": f.partitions,
		"batch_bytes": f.batchBytesN, "in_flight_bytes": f.flightByteN,
		"durability": f.durability, "compression": f.compression, "linger": f.linger.String(), "topic": topic,
	}
}

func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

func checkBenchFlags(f *benchFlags) error {
	switch {
	case f.size < 0 || f.size > 16<<20:
		return fmt.Errorf("--size %d: want 0 to 16 MiB", f.size)
	case f.batch < 1 || f.inFlight < 1 || f.partitions < 1:
		return fmt.Errorf("--batch, --in-flight and --partitions must be at least 1")
	case f.count < 0 || f.count > math.MaxInt32:
		return fmt.Errorf("--count %d out of range", f.count)
	}
	for _, b := range []struct {
		flag, val string
		n         *int
		least     int64
	}{{"--batch-bytes", f.batchBytes, &f.batchBytesN, 1 << 10}, {"--in-flight-bytes", f.flightBytes, &f.flightByteN, 64 << 10}} {
		if b.val == "" {
			continue
		}
		n, err := parseSize(b.val)
		if err != nil || n < b.least || n > math.MaxInt32 {
			return fmt.Errorf("%s %q: want a size from %s to 2GiB (e.g. 8MiB)", b.flag, b.val, formatBytes(b.least))
		}
		*b.n = int(n)
	}
	if f.pollBytes != "" {
		n, err := parseSize(f.pollBytes)
		if err != nil || n <= 0 || n > math.MaxInt32 {
			return fmt.Errorf("--poll-bytes %q: want a size from 1 byte to 2GiB (e.g. 8MiB)", f.pollBytes)
		}
		f.pollBytesN = int(n)
	}
	return nil
}
