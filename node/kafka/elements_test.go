package kafka

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ledgemq/ledge/transport/wire"
)

// pollBackend's sessions answer every poll's partitions with their
// high watermark (the partition's number plus one) and record how many
// partitions each poll named.
type pollBackend struct {
	mu    sync.Mutex
	polls []int
}

type pollSession struct {
	nopSession
	b *pollBackend
}

func (b *pollBackend) Authenticate(string, string) (Session, error) {
	return pollSession{b: b}, nil
}

func (s pollSession) Poll(_ context.Context, m *wire.PollRequest) (*wire.PollReply, func(), error) {
	s.b.mu.Lock()
	s.b.polls = append(s.b.polls, len(m.Partitions))
	s.b.mu.Unlock()
	rep := &wire.PollReply{Partitions: make([]wire.PollPartitionReply, len(m.Partitions))}
	for i, p := range m.Partitions {
		rep.Partitions[i] = wire.PollPartitionReply{HighWatermark: uint64(p.Partition) + 1}
	}
	return rep, func() {}, nil
}

// lockedBuffer is a log's output, safe for the connection's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestFetchPastMaxRequestElements: a Fetch naming more partitions than
// MaxRequestElements keeps its connection; the node polls and answers
// that many (its topic counted), leaves the others out of the response,
// and logs it once for the connection, however many such fetches come.
func TestFetchPastMaxRequestElements(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged lockedBuffer
		b := &pollBackend{}
		s, ln := pipeServer(Config{MaxRequestElements: 16, Logger: slog.New(slog.NewTextHandler(&logged, nil))}, b)
		defer s.Close()
		rc := ln.dial(t)
		if code := rc.authenticate("good"); code != 0 {
			t.Fatalf("authentication: %v", kerr.ErrorForCode(code))
		}
		const partitions = 40
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxBytes = 11, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "t"
		for i := range partitions {
			p := kmsg.NewFetchRequestTopicPartition()
			p.Partition = int32(i)
			ft.Partitions = append(ft.Partitions, p)
		}
		req.Topics = append(req.Topics, ft)
		for range 2 {
			resp := kmsg.NewPtrFetchResponse()
			if err := rc.send(req, resp); err != nil {
				t.Fatalf("a fetch of %d partitions past MaxRequestElements closed the connection: %v", partitions, err)
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 15 {
				t.Fatalf("answered %+v, want the first 15 partitions", resp.Topics)
			}
			for i, p := range resp.Topics[0].Partitions {
				if p.Partition != int32(i) || p.ErrorCode != 0 || p.HighWatermark != int64(i)+1 {
					t.Fatalf("partition %d answered as %d with error %v and high watermark %d", i, p.Partition, kerr.ErrorForCode(p.ErrorCode), p.HighWatermark)
				}
			}
		}
		if err := rc.send(kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse()); err != nil {
			t.Fatalf("the connection did not survive: %v", err)
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.polls) != 2 || b.polls[0] != 15 || b.polls[1] != 15 {
			t.Fatalf("polls named %v partitions, want 15 twice", b.polls)
		}
		if n := strings.Count(logged.String(), "max_request_elements"); n != 1 {
			t.Fatalf("logged %d times for the connection, want once:\n%s", n, logged.String())
		}
	})
}
