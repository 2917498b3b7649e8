package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/record"
)

// The benchmarks run on a real directory (vfs.Default) and measure their
// ceiling in the same run: the ratio metric is what counts.
//
//	go test ./engine -run XXX -bench . -benchtime 2000x -count 3

func benchBatch(b *testing.B, records, size int) []byte {
	b.Helper()
	var bb record.BatchBuilder
	v := make([]byte, size)
	for i := range v {
		v[i] = byte('a' + i%26)
	}
	for i := 0; i < records; i++ {
		bb.Append(record.Record{Timestamp: int64(i), Value: v})
	}
	batch, err := bb.Build(record.CompressionNone)
	if err != nil {
		b.Fatal(err)
	}
	return batch
}

func benchEngine(b *testing.B, dir string, tail int) *Engine {
	b.Helper()
	e, err := Open(Options{FS: vfs.Default, Dir: dir, TailCacheBytes: tail, ReservedBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkAppendNone: batches of 100 × 1 KiB under policy none, against a
// raw sequential write of the same bytes. The two alternate in rounds of
// 8 MiB (short, so that both meet the same load on a shared machine), each
// into files of 64 MiB that stay (as the log's segments do), so both meet
// the same page-cache and writeback conditions. The batches cycle through
// a ring of buffers, each reused once its previous append is written (the
// tail cache is off, so the engine holds no reference then).
//
// ratio-to-raw-write is against a raw writer repeating one buffer (hot in
// the CPU's caches); ratio-to-raw-write-same-buffers is against a raw
// writer of the engine's own ring of buffers, measured in the same rounds.
func BenchmarkAppendNone(b *testing.B) {
	dir := b.TempDir()
	tmpl := benchBatch(b, 100, 1024)
	e := benchEngine(b, filepath.Join(dir, "engine"), -1)
	defer e.Close()
	top, err := e.CreateTopic("bench", TopicConfig{Durability: DurabilityNone})
	if err != nil {
		b.Fatal(err)
	}
	p, _ := top.Partition(0)
	const ring = 64
	bufs := make([][]byte, ring)
	lasts := make([]uint64, ring)
	for i := range bufs {
		bufs[i] = append([]byte(nil), tmpl...)
	}
	ctx := context.Background()
	round := (8 << 20) / len(tmpl)
	rw := &rawWriter{dir: filepath.Join(dir, "raw"), fileBytes: 64 << 20}
	defer rw.close()
	rwSame := &rawWriter{dir: filepath.Join(dir, "raw-same"), fileBytes: 64 << 20}
	defer rwSame.close()
	var raw, rawSame, eng time.Duration
	b.SetBytes(int64(len(tmpl)))
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(round, b.N-done)
		b.StopTimer()
		raw += rw.write(b, [][]byte{tmpl}, 0, n)
		rawSame += rwSame.write(b, bufs, done, n)
		b.StartTimer()
		start := time.Now()
		for i := done; i < done+n; i++ {
			s := i % ring
			if i >= ring {
				if err := p.WaitDurable(ctx, lasts[s]); err != nil {
					b.Fatal(err)
				}
			}
			r, err := p.Append(bufs[s])
			if err != nil {
				b.Fatal(err)
			}
			lasts[s] = r.Last
		}
		if err := p.WaitDurable(ctx, lasts[(done+n-1)%ring]); err != nil {
			b.Fatal(err)
		}
		eng += time.Since(start)
		done += n
	}
	b.StopTimer()
	b.ReportMetric(raw.Seconds()/eng.Seconds(), "ratio-to-raw-write")
	b.ReportMetric(rawSame.Seconds()/eng.Seconds(), "ratio-to-raw-write-same-buffers")
	b.ReportMetric(float64(int64(b.N)*int64(len(tmpl)))/raw.Seconds()/1e6, "raw-MB/s")
}

// rawWriter writes sequentially to files of fileBytes in dir, which stay,
// starting a new file when one is full (as the log rolls segments).
type rawWriter struct {
	dir       string
	fileBytes int64
	f         *os.File
	size      int64
	files     int
}

// write writes n buffers, bufs[from%len(bufs)] first and cycling through
// bufs, and returns the elapsed time, the creation of new files included.
func (w *rawWriter) write(b *testing.B, bufs [][]byte, from, n int) time.Duration {
	b.Helper()
	if w.files == 0 {
		if err := os.MkdirAll(w.dir, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		buf := bufs[(from+i)%len(bufs)]
		if w.f == nil || w.size+int64(len(buf)) > w.fileBytes {
			w.close()
			f, err := os.Create(filepath.Join(w.dir, fmt.Sprintf("raw-%d", w.files)))
			if err != nil {
				b.Fatal(err)
			}
			w.f, w.size = f, 0
			w.files++
		}
		if _, err := w.f.Write(buf); err != nil {
			b.Fatal(err)
		}
		w.size += int64(len(buf))
	}
	return time.Since(start)
}

func (w *rawWriter) close() {
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
}

// BenchmarkAppendAlways4: four concurrent appenders of 16 × 1 KiB batches
// under policy always (group commit), against raw 64 KiB write + fdatasync
// of the same bytes. The two alternate in rounds (fsync latency drifts
// over time on this machine). b.N counts batches over all appenders.
func BenchmarkAppendAlways4(b *testing.B) {
	dir := b.TempDir()
	tmpl := benchBatch(b, 16, 1024)
	rawBuf := make([]byte, 4*len(tmpl))
	e := benchEngine(b, filepath.Join(dir, "engine"), -1)
	defer e.Close()
	top, err := e.CreateTopic("bench", TopicConfig{Durability: DurabilityAlways})
	if err != nil {
		b.Fatal(err)
	}
	p, _ := top.Partition(0)
	ctx := context.Background()
	bufs := make([][]byte, 4)
	for i := range bufs {
		bufs[i] = append([]byte(nil), tmpl...)
	}
	const round = 800 // batches per round
	var raw, eng time.Duration
	b.SetBytes(int64(len(tmpl)))
	b.ReportAllocs()
	b.ResetTimer()
	for done, r := 0, 0; done < b.N; r++ {
		n := min(round, b.N-done)
		b.StopTimer()
		raw += rawWriteSync(b, filepath.Join(dir, fmt.Sprintf("raw-%d", r)), rawBuf, (n+3)/4)
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			k := n / 4
			if w < n%4 {
				k++
			}
			buf := bufs[w]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < k; i++ {
					r, err := p.Append(buf)
					if err != nil {
						b.Error(err)
						return
					}
					if err := p.WaitDurable(ctx, r.Last); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		eng += time.Since(start)
		done += n
	}
	b.StopTimer()
	rawBytes := float64(((b.N + 3) / 4) * len(rawBuf))
	b.ReportMetric((float64(b.N*len(tmpl))/eng.Seconds())/(rawBytes/raw.Seconds()), "ratio-to-raw-fdatasync")
	b.ReportMetric(rawBytes/raw.Seconds()/1e6, "raw-MB/s")
	if st := p.Stats(); st.Syncs > 0 {
		b.ReportMetric(float64(st.Appends)/float64(st.Syncs), "batches/fsync")
	}
}

// rawWriteSync appends buf to a new file n times, each followed by
// fdatasync, and returns the elapsed time.
func rawWriteSync(b *testing.B, path string, buf []byte, n int) time.Duration {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := fdatasync(f); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// BenchmarkRead256MiB reads a 256 MiB log whole, 1 MiB per read, from the
// page cache (tail cache dropped) and from the tail cache, against raw
// 1 MiB ReadAt calls over the same file.
func BenchmarkRead256MiB(b *testing.B) {
	const logBytes = 256 << 20
	dir := b.TempDir()
	e := benchEngine(b, dir, 512<<20)
	defer e.Close()
	p, last := benchLog(b, e, logBytes, true)
	ctx := context.Background()
	var reuse []byte
	readAllBench := func(b *testing.B) {
		var total int
		for from := uint64(0); from <= last; {
			plan, err := p.PlanRead(from, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			var res ReadResult
			if reuse != nil {
				res, err = plan.ExecuteInto(ctx, reuse)
			} else {
				res, err = plan.Execute(ctx)
			}
			plan.Release()
			if err != nil {
				b.Fatal(err)
			}
			for _, bt := range res.Batches {
				total += len(bt)
			}
			from = res.Next
			res.Release()
		}
		if total < logBytes {
			b.Fatalf("read %d bytes", total)
		}
	}
	b.Run("tail-cache", func(b *testing.B) {
		b.SetBytes(logBytes)
		for i := 0; i < b.N; i++ {
			readAllBench(b)
		}
	})
	p.DropTailCache()
	// page-cache: Execute with ReadResult.Release (pooled buffers);
	// caller-buffer: ExecuteInto with one buffer the caller reuses.
	for _, mode := range []string{"page-cache", "page-cache-caller-buffer"} {
		b.Run(mode, func(b *testing.B) {
			reuse = nil
			if mode != "page-cache" {
				reuse = make([]byte, 1<<20+64<<10)
			}
			rawStart := time.Now()
			rawReadSegments(b, p)
			raw := time.Since(rawStart)
			b.SetBytes(logBytes)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				readAllBench(b)
			}
			eng := time.Since(start) / time.Duration(b.N)
			b.StopTimer()
			b.ReportMetric(raw.Seconds()/eng.Seconds(), "ratio-to-raw-read")
		})
	}
}

// rawReadSegments reads the partition's segment files with 1 MiB ReadAt
// calls into one reused buffer.
func rawReadSegments(b *testing.B, p *Partition) {
	buf := make([]byte, 1<<20)
	p.mu.Lock()
	segs := append([]*segment(nil), p.segs...)
	p.mu.Unlock()
	for _, s := range segs {
		f, err := os.Open(s.path)
		if err != nil {
			b.Fatal(err)
		}
		for pos := int64(0); pos < s.size; pos += int64(len(buf)) {
			if _, err := f.ReadAt(buf, pos); err != nil && pos+int64(len(buf)) <= s.size {
				b.Fatal(err)
			}
		}
		f.Close()
	}
}

// BenchmarkAllocs reports allocations per appended batch and per read
// batch for batches of 1, 10 and 100 records of 1 KiB: they stay constant.
func BenchmarkAllocs(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("append/records=%d", n), func(b *testing.B) {
			e := benchEngine(b, b.TempDir(), -1)
			defer e.Close()
			top, _ := e.CreateTopic("bench", TopicConfig{Durability: DurabilityNone, SegmentBytes: 1 << 30})
			p, _ := top.Partition(0)
			tmpl := benchBatch(b, n, 1024)
			const ring = 16
			bufs := make([][]byte, ring)
			lasts := make([]uint64, ring)
			for i := range bufs {
				bufs[i] = append([]byte(nil), tmpl...)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s := i % ring
				if i >= ring {
					_ = p.WaitDurable(ctx, lasts[s])
				}
				r, err := p.Append(bufs[s])
				if err != nil {
					b.Fatal(err)
				}
				lasts[s] = r.Last
			}
		})
		b.Run(fmt.Sprintf("read/records=%d", n), func(b *testing.B) {
			e := benchEngine(b, b.TempDir(), -1)
			defer e.Close()
			top, _ := e.CreateTopic("bench", TopicConfig{Durability: DurabilityNone})
			p, _ := top.Partition(0)
			tmpl := benchBatch(b, n, 1024)
			var last uint64
			for i := 0; i < 64; i++ {
				r, _ := p.Append(append([]byte(nil), tmpl...))
				last = r.Last
			}
			ctx := context.Background()
			_ = p.WaitDurable(ctx, last)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				from := uint64(i%64) * uint64(n)
				plan, err := p.PlanRead(from, 1)
				if err != nil {
					b.Fatal(err)
				}
				res, err := plan.Execute(ctx)
				plan.Release()
				if err != nil || len(res.Batches) != 1 {
					b.Fatal(err, len(res.Batches))
				}
			}
		})
	}
}

// benchLog creates a topic of 64 MiB segments under policy none in e,
// appends logBytes of batches of 100 records of 1 KiB to its partition and
// waits until they are written; it returns the partition and the last
// offset. With atTail a consumer sits at the tail meanwhile (a read at the
// high watermark now and then), so the tail cache keeps what its budget
// allows.
func benchLog(b *testing.B, e *Engine, logBytes int, atTail bool) (*Partition, uint64) {
	b.Helper()
	top, err := e.CreateTopic("bench", TopicConfig{Durability: DurabilityNone, SegmentBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	p, _ := top.Partition(0)
	tmpl := benchBatch(b, 100, 1024)
	var last uint64
	for written, i := 0, 0; written < logBytes; written, i = written+len(tmpl), i+1 {
		if atTail && i%64 == 0 {
			plan, err := p.PlanRead(p.State().HighWatermark, 1)
			if err != nil {
				b.Fatal(err)
			}
			plan.Release()
		}
		r, err := p.Append(append([]byte(nil), tmpl...))
		if err != nil {
			b.Fatal(err)
		}
		last = r.Last
	}
	if err := p.WaitDurable(context.Background(), last); err != nil {
		b.Fatal(err)
	}
	return p, last
}
