package node

import (
	"log/slog"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// Metrics receives what the node counts while it serves: the events that
// cannot be read back from its state later. Everything that can (offsets,
// epochs, committed offsets, lag, appends, connections) is read from the
// node and its storage when metrics are scraped, not pushed here.
//
// Implementations must be safe for concurrent use and must not block: the
// calls are made on the request path. PromMetrics is the implementation
// behind /metrics; a nil Metrics counts nothing.
type Metrics interface {
	// RequestDone is called once per request answered, with the status of
	// its reply and the time from the start of its handling to its reply
	// being ready (for a long poll, the wait included).
	RequestDone(kind wire.Kind, status wire.Status, d time.Duration)
	// Delivered is called when a poll returned record batches from a
	// partition, with their size.
	Delivered(topic string, partition uint32, bytes int)
	// FenceRejected is called for every piece of work refused by a fence
	// check: a request's own status, or one partition's status within a
	// poll, commit or reset reply.
	FenceRejected(kind wire.Kind, code fence.Code)
}

// observeRequest reports one answered request to m (when not nil) and
// logs its fence rejections at debug level. req is the decoded request;
// rep is its reply, meaningful when err is nil. It is the one call the
// request path makes for metrics.
func observeRequest(log *slog.Logger, m Metrics, kind wire.Kind, start time.Time, req, rep wire.Message, err error) {
	status, msg := StatusOf(err)
	if m != nil {
		m.RequestDone(kind, status, time.Since(start))
	}
	fenced := func(s wire.Status, msg string) {
		if !s.IsFence() {
			return
		}
		code := fence.Code(s - wire.FenceStatusBase)
		if m != nil {
			m.FenceRejected(kind, code)
		}
		if log != nil {
			log.Debug("fence rejection", "request", kind.String(), "code", code.String(), "reason", msg)
		}
	}
	if err != nil {
		fenced(status, msg)
		return
	}
	switch r := rep.(type) {
	case *wire.PollReply:
		q, ok := req.(*wire.PollRequest)
		if !ok || q == nil || r == nil {
			return
		}
		for i := range r.Partitions {
			p := &r.Partitions[i]
			fenced(p.Status, p.Message)
			if i >= len(q.Partitions) || m == nil {
				continue
			}
			n := len(p.Batches)
			for _, b := range p.BatchParts {
				n += len(b)
			}
			if n > 0 {
				m.Delivered(q.Partitions[i].Topic, q.Partitions[i].Partition, n)
			}
		}
	case *wire.CommitReply:
		if r != nil {
			for _, p := range r.Partitions {
				fenced(p.Status, p.Message)
			}
		}
	case *wire.ResetPositionReply:
		if r != nil {
			for _, p := range r.Partitions {
				fenced(p.Status, p.Message)
			}
		}
	case *wire.GetCommittedReply:
		if r != nil {
			for _, p := range r.Partitions {
				fenced(p.Status, p.Message)
			}
		}
	}
}
