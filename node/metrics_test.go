package node

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	dto "github.com/prometheus/client_model/go"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// recordingMetrics is a Metrics that records every call.
type recordingMetrics struct {
	mu     sync.Mutex
	events []string
}

func (r *recordingMetrics) add(format string, args ...any) {
	r.mu.Lock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recordingMetrics) RequestDone(kind wire.Kind, status wire.Status, _ time.Duration) {
	r.add("done %s %s", kind, status)
}
func (r *recordingMetrics) Delivered(topic string, p uint32, bytes int) {
	r.add("delivered %s/%d %d bytes", topic, p, bytes)
}
func (r *recordingMetrics) FenceRejected(kind wire.Kind, code fence.Code) {
	r.add("fenced %s %s", kind, code)
}

func (r *recordingMetrics) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := strings.Join(r.events, "\n")
	r.events = nil
	return out
}

func TestObserveRequest(t *testing.T) {
	m := &recordingMetrics{}
	start := time.Now()
	stale := wire.FenceStatusBase + wire.Status(fence.CodeStaleHistory)
	for _, tc := range []struct {
		name     string
		kind     wire.Kind
		req, rep wire.Message
		err      error
		want     string
	}{
		{
			"an append", wire.KindProduce,
			&wire.ProduceRequest{Topic: "orders", Partition: 2, Batch: make([]byte, 100)},
			&wire.ProduceReply{BaseOffset: 10, LastOffset: 14}, nil,
			"done produce ok",
		},
		{
			"a fenced producer", wire.KindProduce,
			&wire.ProduceRequest{Topic: "orders"}, (*wire.ProduceReply)(nil), fence.ErrFencedProducer,
			"done produce fenced producer\nfenced produce fenced producer",
		},
		{
			"a poll: one partition delivers, one is fenced", wire.KindPoll,
			&wire.PollRequest{Partitions: []wire.PollPartition{{Topic: "a", Partition: 0}, {Topic: "b", Partition: 1}}},
			&wire.PollReply{Partitions: []wire.PollPartitionReply{
				{BatchParts: [][]byte{make([]byte, 30), make([]byte, 12)}},
				{Status: stale, Message: "purged"},
			}}, nil,
			"done poll ok\ndelivered a/0 42 bytes\nfenced poll stale history",
		},
		{
			"a commit with a stale token", wire.KindCommit,
			&wire.CommitRequest{}, &wire.CommitReply{Partitions: []wire.OffsetResult{{Status: stale}, {}}}, nil,
			"done commit ok\nfenced commit stale history",
		},
		{
			"an error that is not a fence", wire.KindCreateTopic,
			&wire.CreateTopicRequest{}, (*wire.CreateTopicReply)(nil), ErrTopicExists,
			"done create-topic topic exists",
		},
	} {
		observeRequest(slog.New(slog.DiscardHandler), m, tc.kind, start, tc.req, tc.rep, tc.err)
		if got := m.take(); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	// A nil Metrics is allowed: nothing is counted, nothing panics.
	observeRequest(nil, nil, wire.KindProduce, start, &wire.ProduceRequest{}, &wire.ProduceReply{LastOffset: 1}, nil)
}

func TestObserveRequestLogsFenceRejectionsAtDebug(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	observeRequest(log, nil, wire.KindCommit, time.Now(), &wire.CommitRequest{}, nil, fence.ErrFencedSession)
	if got := buf.String(); !strings.Contains(got, "level=DEBUG") || !strings.Contains(got, "fence rejection") ||
		!strings.Contains(got, `code="fenced session"`) {
		t.Errorf("log = %q", got)
	}
}

// metricValue returns the value of the metric name whose labels include
// every pair of labels ("k", "v", ...); ok is false when there is none.
func metricValue(t testing.TB, m *PromMetrics, name string, labels ...string) (float64, bool) {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, mt := range f.GetMetric() {
			have := map[string]string{}
			for _, lp := range mt.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			return valueOf(mt), true
		}
	}
	return 0, false
}

func valueOf(mt *dto.Metric) float64 {
	switch {
	case mt.GetCounter() != nil:
		return mt.GetCounter().GetValue()
	case mt.GetGauge() != nil:
		return mt.GetGauge().GetValue()
	case mt.GetHistogram() != nil:
		return float64(mt.GetHistogram().GetSampleCount())
	}
	return mt.GetUntyped().GetValue()
}

// mustMetric is metricValue that fails the test when the metric is absent.
func mustMetric(t testing.TB, m *PromMetrics, name string, labels ...string) float64 {
	t.Helper()
	v, ok := metricValue(t, m, name, labels...)
	if !ok {
		t.Fatalf("no metric %s%v", name, labels)
	}
	return v
}

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
		if got := mustMetric(t, m, tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s%v = %v; want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if d := m.deliveredBytes("orders", 0); d != 60 {
		t.Errorf("delivered bytes %d", d)
	}
	// The process collector is what reports resident memory.
	if _, ok := metricValue(t, m, "process_resident_memory_bytes"); !ok {
		t.Error("no process_resident_memory_bytes")
	}
	// Before a node is attached, nothing of a node is reported.
	if _, ok := metricValue(t, m, "ledge_topics"); ok {
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
		if got := mustMetric(t, m, "ledge_fsync_duration_seconds", "target", target); got != want {
			t.Errorf("fsyncs of %s = %v; want %v", target, got, want)
		}
	}
	if got := mustMetric(t, m, "ledge_fsync_failures_total", "target", "segment"); got != 1 {
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
