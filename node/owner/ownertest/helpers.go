package ownertest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/record"
)

// Batch builds a batch of records with the given values (timestamp 1,
// uncompressed).
func Batch(t testing.TB, values ...string) []byte {
	t.Helper()
	var b record.BatchBuilder
	for _, v := range values {
		b.Append(record.Record{Timestamp: 1, Value: []byte(v)})
	}
	batch, err := b.Build(record.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

// NewOwner builds the owner of l in m, with producer and session
// registries in m.
func NewOwner(t testing.TB, topic fence.TopicID, m *Meta, l *Log) *owner.Owner {
	t.Helper()
	prods, err := owner.OpenProducers(m)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := owner.OpenSessions(m)
	if err != nil {
		t.Fatal(err)
	}
	o, err := owner.NewOwner(owner.OwnerConfig{Topic: topic, Log: l, Meta: m, Producers: prods, Sessions: sess})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// BenchBatch builds a batch of records values of size bytes each.
func BenchBatch(b testing.TB, records, size int) []byte {
	var bb record.BatchBuilder
	v := make([]byte, size)
	for range records {
		bb.Append(record.Record{Timestamp: 1, Value: v})
	}
	batch, err := bb.Build(record.CompressionNone)
	if err != nil {
		b.Fatal(err)
	}
	return batch
}

// RecordsOf returns the values of the records a poll delivered (within
// its token's range).
func RecordsOf(t interface{ Fatal(...any) }, r owner.PollResult) []string {
	var out []string
	for _, b := range r.Batches {
		it, err := record.NewRecordIterator(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		for rec, ok := it.Next(); ok; rec, ok = it.Next() {
			if rec.Offset >= r.Token.From && rec.Offset < r.Token.Next {
				out = append(out, string(rec.Value))
			}
		}
	}
	return out
}

// Floor is a retention floor a test moves (an uplink's position).
type Floor struct {
	mu  sync.Mutex
	off uint64
	set bool
}

// Move sets the floor (set false: no floor).
func (f *Floor) Move(off uint64, set bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.off, f.set = off, set
}

// Get is the floor as an owner asks it (OwnerConfig.RetentionFloor).
func (f *Floor) Get() (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.off, f.set
}

// ScenarioTopic is the topic id the scenario tests use.
var ScenarioTopic = fence.TopicID{0x1e, 0xd9, 0xe0}

// RenderPoll renders a poll's outcome as the scenario files spell it.
func RenderPoll(r owner.PollResult, err error) string {
	if err != nil {
		return RenderErr(err)
	}
	var sb strings.Builder
	n := 0
	for _, b := range r.Batches {
		it, err := record.NewRecordIterator(b, 0)
		if err != nil {
			return "error: " + err.Error()
		}
		for rec, ok := it.Next(); ok; rec, ok = it.Next() {
			if rec.Offset < r.Token.From || rec.Offset >= r.Token.Next {
				continue
			}
			if n == 0 {
				sb.WriteString("records:")
			}
			fmt.Fprintf(&sb, " %d:%s", rec.Offset, rec.Value)
			n++
		}
		if it.Err() != nil {
			return "error: " + it.Err().Error()
		}
	}
	if n == 0 {
		sb.WriteString("no records")
	}
	fmt.Fprintf(&sb, "\nnext %d; token h%d [%d,%d)", r.Next, r.Token.History, r.Token.From, r.Token.Next)
	return sb.String()
}

// RenderErr renders an error as the scenario files spell it: a fence
// rejection by its code and action.
func RenderErr(err error) string {
	var fe *fence.Error
	if errors.As(err, &fe) {
		retry := ""
		if fence.Retryable(err) {
			retry = ", retryable"
		}
		return fmt.Sprintf("rejected: %s (%s%s)", fe.Code, fe.Action, retry)
	}
	return "error: " + err.Error()
}

// EngineOwner is the owner of a partition of a fresh storage engine on
// fs in dir, with producers and sessions, for benchmarks.
func EngineOwner(b testing.TB, fs vfs.FS, dir string, d engine.Durability) *owner.Owner {
	e, err := engine.Open(engine.Options{FS: fs, Dir: dir, ReservedBytes: -1,
		Now: func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close() })
	t, err := e.CreateTopic("bench", engine.TopicConfig{Partitions: 1, Durability: d})
	if err != nil {
		b.Fatal(err)
	}
	p, err := t.Partition(0)
	if err != nil {
		b.Fatal(err)
	}
	meta := owner.NewEngineMetadata(e)
	prods, err := owner.OpenProducers(meta)
	if err != nil {
		b.Fatal(err)
	}
	sess, err := owner.OpenSessions(meta)
	if err != nil {
		b.Fatal(err)
	}
	o, err := owner.NewOwner(owner.OwnerConfig{Topic: t.ID(), Log: owner.NewEngineLog(p), Meta: meta, Producers: prods, Sessions: sess})
	if err != nil {
		b.Fatal(err)
	}
	return o
}

// KeyedBatch returns an uncompressed batch of records with the keys and
// values given in pairs: key, value, key, value...
func KeyedBatch(t testing.TB, kv ...string) []byte {
	t.Helper()
	var b record.BatchBuilder
	for i := 0; i+1 < len(kv); i += 2 {
		b.Append(record.Record{Timestamp: 1, Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	batch, err := b.Build(record.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}
