package ceiling

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"github.com/ledgemq/ledge/internal/quicceiling"
)

// Set is one measurement of every ceiling.
type Set struct {
	QUICMsgsPerSec   float64 `json:"quic_msgs_per_sec"`  // 1 KiB writes on one raw stream
	QUICBytesPerSec  float64 `json:"quic_bytes_per_sec"` // the same in bytes
	SeqWriteBPS      float64 `json:"seq_write_bytes_per_sec"`
	SeqWriteSyncBPS  float64 `json:"seq_write_then_fdatasync_bytes_per_sec"`
	FsyncOpsPerSec   float64 `json:"fsync64k_ops_per_sec"` // 64 KiB write + fdatasync, one after the other
	FsyncBytesPerSec float64 `json:"fsync64k_bytes_per_sec"`
	FsyncP50us       int64   `json:"fsync64k_p50_us"`
	FsyncP99us       int64   `json:"fsync64k_p99_us"`
	// The raw QUIC stream placed as the servers are (zero where nothing
	// is pinned): its server end a process of its own on the servers'
	// CPUs with their GOMAXPROCS, its client end on the load generator's;
	// towards the server (a produce's direction, QUICTo) and from it (a
	// replay's, QUICFrom).
	PlacedQUICInBytesPerSec  float64 `json:"placed_quic_in_bytes_per_sec,omitempty"`
	PlacedQUICOutBytesPerSec float64 `json:"placed_quic_out_bytes_per_sec,omitempty"`
	// The same two through quic-go's own sockets rather than those Ledge
	// gives it (transport/quic.ListenUDP, which every other QUIC ceiling
	// reads through): for reference, not a ceiling of Ledge.
	PlacedQUICOwnInBytesPerSec  float64 `json:"placed_quic_own_socket_in_bytes_per_sec,omitempty"`
	PlacedQUICOwnOutBytesPerSec float64 `json:"placed_quic_own_socket_out_bytes_per_sec,omitempty"`
	// One-at-a-time round trips (RoundTrips) placed as the servers are:
	// the far end a rawsink on the servers' CPUs with their GOMAXPROCS,
	// this end where the load generator runs. Over a raw quic-go stream
	// (Ledge's transport, the ceiling of its sync-1k latency) and, for
	// reference, over TLS 1.3 on TCP (JetStream TLS's transport).
	PlacedQUICRoundTrip RoundTrip `json:"placed_quic_round_trip,omitzero"`
	PlacedTLSRoundTrip  RoundTrip `json:"placed_tls_tcp_round_trip,omitzero"`
}

// Options bound the measurements.
type Options struct {
	Dir       string        // a directory on the servers' file system
	QUICFor   time.Duration // raw QUIC run
	SeqBytes  int64         // sequential write volume
	FsyncFor  time.Duration // write+fdatasync run
	ChunkSize int           // sequential write size
}

// Measure runs every ceiling once.
func Measure(ctx context.Context, o Options) (Set, error) {
	var s Set
	q, err := quicceiling.Measure(ctx, o.QUICFor)
	if err != nil {
		return s, fmt.Errorf("ceiling: quic: %w", err)
	}
	s.QUICMsgsPerSec, s.QUICBytesPerSec = q.MessagesPerSec, q.BytesPerSec
	if s.SeqWriteBPS, s.SeqWriteSyncBPS, err = seqWrite(o.Dir, o.SeqBytes, o.ChunkSize); err != nil {
		return s, fmt.Errorf("ceiling: sequential write: %w", err)
	}
	if err := fsync64K(ctx, o.Dir, o.FsyncFor, &s); err != nil {
		return s, fmt.Errorf("ceiling: write+fdatasync: %w", err)
	}
	return s, nil
}

// seqWrite writes total bytes in chunk-sized writes to a new file: the
// page-cache rate, and the rate counting a final fdatasync.
func seqWrite(dir string, total int64, chunk int) (cached, synced float64, err error) {
	if chunk <= 0 {
		chunk = 1 << 20
	}
	f, err := os.CreateTemp(dir, "ceiling-seq-*")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, chunk)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	start := time.Now()
	var n int64
	for n < total {
		w, err := f.Write(buf)
		if err != nil {
			return 0, 0, err
		}
		n += int64(w)
	}
	wrote := time.Since(start)
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return 0, 0, err
	}
	all := time.Since(start)
	return float64(n) / wrote.Seconds(), float64(n) / all.Seconds(), nil
}

// fsync64K appends 64 KiB and fdatasyncs, over and over, for d.
func fsync64K(ctx context.Context, dir string, d time.Duration, s *Set) error {
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("ceiling-fsync-%d", time.Now().UnixNano())))
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i * 13)
	}
	h := hdrhistogram.New(1, 60_000_000, 3)
	start := time.Now()
	var ops int
	for time.Since(start) < d && ctx.Err() == nil {
		t := time.Now()
		if _, err := f.Write(buf); err != nil {
			return err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return err
		}
		_ = h.RecordValue(max(time.Since(t).Microseconds(), 1))
		ops++
	}
	el := time.Since(start).Seconds()
	s.FsyncOpsPerSec = float64(ops) / el
	s.FsyncBytesPerSec = float64(ops*len(buf)) / el
	s.FsyncP50us, s.FsyncP99us = h.ValueAtQuantile(50), h.ValueAtQuantile(99)
	return nil
}
