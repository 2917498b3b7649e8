package ops

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/ops/opstest"
	"github.com/ledgemq/ledge/transport/wire"
)

func TestPromMetricsCounters(t *testing.T) {
	m := NewPromMetrics("test")
	m.RequestDone(wire.KindProduce, wire.StatusOK, 3*time.Millisecond)
	m.RequestDone(wire.KindProduce, wire.StatusOK, 5*time.Millisecond)
	m.RequestDone(wire.KindPoll, wire.FenceStatusBase+wire.Status(fence.CodeStaleHistory), time.Millisecond)
	m.FenceRejected(wire.KindPoll, fence.CodeStaleHistory)
	m.Delivered("orders", 0, 60)

	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"ledge_requests_total", []string{"kind", "produce", "status", "ok"}, 2},
		{"ledge_requests_total", []string{"kind", "poll", "status", "stale_history"}, 1},
		{"ledge_request_duration_seconds", []string{"kind", "produce"}, 2},
		{"ledge_fence_rejections_total", []string{"kind", "poll", "code", "stale_history"}, 1},
		{"ledge_build_info", []string{"version", "test"}, 1},
	} {
		if got := opstest.MustMetric(t, m.Registry(), tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s%v = %v; want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if d := m.deliveredBytes("orders", 0); d != 60 {
		t.Errorf("delivered bytes %d", d)
	}
	// The process collector is what reports resident memory.
	if _, ok := opstest.MetricValue(t, m.Registry(), "process_resident_memory_bytes"); !ok {
		t.Error("no process_resident_memory_bytes")
	}
	// Before a node is attached, nothing of a node is reported.
	if _, ok := opstest.MetricValue(t, m.Registry(), "ledge_topics"); ok {
		t.Error("ledge_topics reported without a node")
	}
}

func TestWrapFSTimesSyncsAndCountsFailures(t *testing.T) {
	m := NewPromMetrics("test")
	failing := errors.New("injected EIO")
	inner := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) && strings.HasSuffix(op.Path, "bad.log") {
			return failing
		}
		return nil
	}))
	var logBuf strings.Builder
	fs := m.WrapFS(inner, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err := fs.MkdirAll("data/meta", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"data/good.log", "data/meta/000001.log", "data/bad.log"} {
		f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		err = f.SyncData()
		if (err != nil) != strings.HasSuffix(name, "bad.log") {
			t.Errorf("%s: SyncData = %v", name, err)
		}
		_ = f.Close()
	}
	d, err := fs.OpenDir("data")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	_ = d.Close()

	for target, want := range map[string]float64{"segment": 2, "metadata": 1, "directory": 1} {
		if got := opstest.MustMetric(t, m.Registry(), "ledge_fsync_duration_seconds", "target", target); got != want {
			t.Errorf("fsyncs of %s = %v; want %v", target, got, want)
		}
	}
	if got := opstest.MustMetric(t, m.Registry(), "ledge_fsync_failures_total", "target", "segment"); got != 1 {
		t.Errorf("fsync failures = %v; want 1", got)
	}
	if !strings.Contains(logBuf.String(), "fsync failed") || !strings.Contains(logBuf.String(), "bad.log") {
		t.Errorf("log = %q", logBuf.String())
	}
	if fs.Unwrap() != inner {
		t.Error("Unwrap does not return the wrapped FS")
	}
}

func TestRates(t *testing.T) {
	r := newRates()
	k := rateKey{topic: "t"}
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	if rec, b := r.observe(k, rateSample{at: at(0), records: 0, bytes: 0}); rec != 0 || b != 0 {
		t.Errorf("first sample: %v %v", rec, b)
	}
	if rec, b := r.observe(k, rateSample{at: at(2), records: 200, bytes: 2000}); rec != 100 || b != 1000 {
		t.Errorf("after 2s: %v %v; want 100 1000", rec, b)
	}
	// Samples older than the window are dropped: the rate follows the
	// recent traffic.
	for s := 3.0; s <= 30; s++ {
		r.observe(k, rateSample{at: at(s), records: 200, bytes: 2000})
	}
	if rec, _ := r.observe(k, rateSample{at: at(31), records: 200, bytes: 2000}); rec != 0 {
		t.Errorf("idle partition: %v records/s; want 0", rec)
	}
	if n := len(r.samples[k]); n > int(rateWindow/rateSpacing)+2 {
		t.Errorf("%d samples kept", n)
	}
	r.keep(map[rateKey]bool{})
	if len(r.samples) != 0 {
		t.Error("keep did not forget a deleted partition")
	}
}
