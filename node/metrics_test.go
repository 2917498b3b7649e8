package node

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

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
