package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/sdk"
	"github.com/spf13/cobra"
)

func newBenchProduceCommand(cf *clientFlags, f *benchFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "produce",
		Short: "Produce as fast as the window allows; report messages/s, MB/s and latency per record",
		Long: `Produce as fast as the in-flight window allows and report messages/s,
MB/s, latency per record and CPU per GB, beside the raw quic-go ceiling.

A produce also writes every byte into the page cache, which the raw
stream does not. Against an in-process node the run then measures that
too: 1 MiB writes of new data to a file beside the log, after the run
(on a virtual machine whose memory the host provides on first touch, new
page-cache pages can cost several times the stream's CPU per byte), and
the most the stream and those writes allow together on the CPUs the
stream kept busy.`,
		Example: `  ledge bench produce
  ledge bench produce --size 128 --partitions 4 --duration 30s --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchProduce(cmd, cf, f) },
	}
}

func newBenchConsumeCommand(cf *clientFlags, f *benchFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "consume",
		Short: "Preload a log, then read it from the start; report messages/s, MB/s and latency per poll",
		Example: `  ledge bench consume
  ledge bench consume --log-size 1GiB --size 1024`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchConsume(cmd, cf, f) },
	}
}

func benchProducer(ctx context.Context, env *benchEnv, f *benchFlags) (*sdk.Producer, error) {
	comp, err := record.ParseCompression(f.compression)
	if err != nil {
		return nil, err
	}
	// The loop keeps twice a window buffered per partition: twice the
	// records in flight, or twice the bytes, whichever is fewer records.
	flightBytes := f.flightByteN
	if flightBytes == 0 {
		flightBytes = sdk.DefaultMaxInFlightBytes
	}
	perPart := min(2*f.inFlight, max(2*flightBytes/max(f.size, 1), 2))
	return env.client.NewProducer(ctx, env.topic,
		sdk.WithMaxBatchRecords(f.batch), sdk.WithMaxInFlight(f.inFlight), sdk.WithLinger(f.linger),
		sdk.WithMaxBatchBytes(f.batchBytesN), sdk.WithMaxInFlightBytes(f.flightByteN),
		sdk.WithCompression(comp), sdk.WithMaxBufferedRecords(perPart*f.partitions))
}

// benchRecord is a record of the produce benchmark with its send time and
// its callback.
type benchRecord struct {
	rec sdk.Record
	t0  time.Time
	cb  func(*sdk.Record, error)
}

func runBenchProduce(cmd *cobra.Command, cf *clientFlags, f *benchFlags) error {
	if err := checkBenchFlags(f); err != nil {
		return err
	}
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	stderr := cmd.ErrOrStderr()
	env, err := openBench(ctx, cf, f, stderr)
	if err != nil {
		return err
	}
	defer env.close()
	p, err := benchProducer(ctx, env, f)
	if err != nil {
		return err
	}
	ceilBefore, err := rawCeiling(ctx, f.ceiling)
	if err != nil {
		return err
	}
	pls := payloads(f.seed, f.size, 64)
	h := newLatencyHistogram()
	var (
		mu       sync.Mutex
		acked    atomic.Int64
		failures atomic.Int64
		firstErr atomic.Pointer[error]
	)
	// Records and their callbacks are reused once acknowledged, so the
	// loop measures the producer rather than the allocator.
	var recs sync.Pool
	recs.New = func() any {
		br := &benchRecord{}
		br.cb = func(_ *sdk.Record, err error) {
			defer recs.Put(br)
			if err != nil {
				failures.Add(1)
				firstErr.CompareAndSwap(nil, &err)
				return
			}
			us := time.Since(br.t0).Microseconds()
			mu.Lock()
			_ = h.RecordValue(max(us, 1))
			mu.Unlock()
			acked.Add(1)
		}
		return br
	}
	stopProfile, err := startProfile(f)
	if err != nil {
		return err
	}
	prog := newProgress(stderr)
	cpu := startCPU()
	start := time.Now()
	deadline := start.Add(f.duration)
	var sent int64
	for ctx.Err() == nil {
		if f.count > 0 && sent >= int64(f.count) {
			break
		}
		if f.count == 0 && sent&255 == 0 && !time.Now().Before(deadline) {
			break
		}
		br := recs.Get().(*benchRecord)
		br.t0 = time.Now()
		br.rec = sdk.Record{Value: pls[sent%int64(len(pls))], Timestamp: br.t0}
		p.Produce(ctx, &br.rec, br.cb)
		sent++
		if sent&1023 == 0 {
			n := acked.Load()
			prog.tick("acknowledged", n, n*int64(f.size))
		}
	}
	flushErr := p.Flush(context.WithoutCancel(ctx))
	elapsed := time.Since(start)
	cpuUsed := cpu.used()
	stopProfile()
	prog.done()
	_ = p.Close(context.WithoutCancel(ctx))
	if flushErr != nil {
		return flushErr
	}

	mu.Lock()
	r := &benchResult{Mode: "produce", Target: env.where, Params: benchParams(f, env.topic),
		Messages: acked.Load(), Bytes: acked.Load() * int64(f.size), LatencyOf: "record, Produce to acknowledgement",
		Errors: failures.Load()}
	r.fill(h, elapsed)
	mu.Unlock()
	r.setCPU(cpuUsed)
	ceilAfter, err := rawCeiling(ctx, f.ceiling)
	if err != nil {
		return err
	}
	if dir := env.writeCeilingDir(); dir != "" && f.ceiling > 0 {
		// Measured while the run's log still holds its memory, as the
		// run's own writes found it: as much as the run wrote, between
		// 64 MiB and 1 GiB.
		if r.Write, err = measureWriteCeiling(dir, max(min(r.Bytes, 1<<30), 64<<20)); err != nil {
			return err
		}
	}
	r.relate(ceilBefore, ceilAfter)
	if err := r.print(cmd.OutOrStdout(), f.jsonOut); err != nil {
		return err
	}
	if e := firstErr.Load(); e != nil {
		return fmt.Errorf("%d records failed; the first: %w", failures.Load(), *e)
	}
	return nil
}

func runBenchConsume(cmd *cobra.Command, cf *clientFlags, f *benchFlags) error {
	if err := checkBenchFlags(f); err != nil {
		return err
	}
	count := int64(f.count)
	if count == 0 {
		size, err := parseSize(f.logSize)
		if err != nil {
			return fmt.Errorf("--log-size: %w", err)
		}
		count = max(size/int64(max(f.size, 1)), 1)
	}
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	stderr := cmd.ErrOrStderr()
	env, err := openBench(ctx, cf, f, stderr)
	if err != nil {
		return err
	}
	defer env.close()

	// Preload.
	p, err := benchProducer(ctx, env, f)
	if err != nil {
		return err
	}
	pls := payloads(f.seed, f.size, 64)
	var failed atomic.Pointer[error]
	prog := newProgress(stderr)
	for i := int64(0); i < count && ctx.Err() == nil; i++ {
		p.Produce(ctx, &sdk.Record{Value: pls[i%int64(len(pls))]}, func(_ *sdk.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
		if i&1023 == 0 {
			prog.tick("preloaded", i, i*int64(f.size))
		}
	}
	if err := p.Close(ctx); err != nil {
		return err
	}
	prog.done()
	if e := failed.Load(); e != nil {
		return fmt.Errorf("preload: %w", *e)
	}

	// Read it back from the start.
	ceilBefore, err := rawCeiling(ctx, f.ceiling)
	if err != nil {
		return err
	}
	copts := []sdk.ConsumerOption{sdk.WithStart(sdk.AtFirst()), sdk.WithMaxWait(time.Second)}
	if f.pollBytesN > 0 {
		copts = append(copts, sdk.WithMaxBytes(f.pollBytesN))
	}
	cons, err := env.client.NewConsumer(ctx, env.topic, copts...)
	if err != nil {
		return err
	}
	defer cons.Close(context.WithoutCancel(ctx))
	h := newLatencyHistogram()
	var read, bytes int64
	stopProfile, err := startProfile(f)
	if err != nil {
		return err
	}
	prog = newProgress(stderr)
	cpu := startCPU()
	start := time.Now()
	for read < count {
		t0 := time.Now()
		recs, err := cons.Poll(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				break
			}
			return err
		}
		_ = h.RecordValue(max(time.Since(t0).Microseconds(), 1))
		for _, r := range recs {
			bytes += int64(len(r.Value) + len(r.Key))
		}
		read += int64(len(recs))
		sdk.Recycle(recs)
		prog.tick("read", read, bytes)
	}
	elapsed := time.Since(start)
	r := &benchResult{Mode: "consume", Target: env.where, Params: benchParams(f, env.topic),
		Messages: read, Bytes: bytes, LatencyOf: "poll round trip"}
	r.setCPU(cpu.used())
	stopProfile()
	prog.done()
	r.fill(h, elapsed)
	ceilAfter, err := rawCeiling(ctx, f.ceiling)
	if err != nil {
		return err
	}
	r.relate(ceilBefore, ceilAfter)
	return r.print(cmd.OutOrStdout(), f.jsonOut)
}
