package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeProducer acknowledges from a goroutine of its own, in order, and
// records the most messages it ever had in flight.
type fakeProducer struct {
	acks     chan func(error)
	inflight atomic.Int64
	peak     atomic.Int64
	fail     bool
	wg       sync.WaitGroup
}

func newFake(fail bool) *fakeProducer {
	p := &fakeProducer{acks: make(chan func(error), 1<<16), fail: fail}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for done := range p.acks {
			p.inflight.Add(-1)
			if p.fail {
				done(errors.New("refused"))
			} else {
				done(nil)
			}
		}
	}()
	return p
}

func (p *fakeProducer) Send(_ []byte, done func(error)) {
	n := p.inflight.Add(1)
	for {
		old := p.peak.Load()
		if n <= old || p.peak.CompareAndSwap(old, n) {
			break
		}
	}
	p.acks <- done
}

func (p *fakeProducer) SendSync(context.Context, []byte) error {
	if p.fail {
		return errors.New("refused")
	}
	return nil
}
func (p *fakeProducer) Flush(context.Context) error { return nil }
func (p *fakeProducer) Close() error                { close(p.acks); p.wg.Wait(); return nil }

func TestRunAsyncCountsEveryAcknowledgementWithinTheWindow(t *testing.T) {
	a, b := newFake(false), newFake(false)
	defer a.Close()
	defer b.Close()
	var began, ended int
	res, err := RunAsync(context.Background(), []Producer{a, b},
		Params{Size: 100, Window: 7, Count: 1000, Seed: 1},
		Hooks{Begin: func() { began++ }, End: func() { ended++ }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Msgs != 2000 || res.Bytes != 200000 {
		t.Fatalf("got %d msgs, %d bytes; want 2000, 200000", res.Msgs, res.Bytes)
	}
	if res.Hist.TotalCount() != 2000 {
		t.Fatalf("histogram holds %d values, want 2000", res.Hist.TotalCount())
	}
	if pa, pb := a.peak.Load(), b.peak.Load(); pa > 7 || pb > 7 {
		t.Fatalf("peak in flight %d and %d, window 7", pa, pb)
	}
	if began != 1 || ended != 1 {
		t.Fatalf("hooks ran %d and %d times, want once each", began, ended)
	}
}

func TestRunAsyncStopsWhenEverySendFails(t *testing.T) {
	p := newFake(true)
	defer p.Close()
	res, err := RunAsync(context.Background(), []Producer{p}, Params{Size: 10, Window: 10, Count: 1 << 20}, Hooks{})
	if err == nil {
		t.Fatal("no error from a producer that refuses everything")
	}
	if res.Errors < maxErrors || res.Msgs != 0 {
		t.Fatalf("errors %d msgs %d", res.Errors, res.Msgs)
	}
}

func TestRunSyncCountsMessages(t *testing.T) {
	p := newFake(false)
	defer p.Close()
	res, err := RunSync(context.Background(), p, Params{Size: 1024, Count: 50}, Hooks{})
	if err != nil || res.Msgs != 50 || res.Bytes != 50*1024 {
		t.Fatalf("msgs %d bytes %d err %v", res.Msgs, res.Bytes, err)
	}
}

type fakeReader struct{ left int }

func (r *fakeReader) Read(context.Context) (int, int64, error) {
	n := min(r.left, 300)
	r.left -= n
	if n == 0 {
		return 0, 0, errors.New("end of log")
	}
	return n, int64(n) * 1024, nil
}
func (r *fakeReader) Close() error { return nil }

func TestRunReplayReadsUntilTheTotal(t *testing.T) {
	res, err := RunReplay(context.Background(), &fakeReader{left: 1000}, 1000, Hooks{})
	if err != nil || res.Msgs != 1000 || res.Bytes != 1000*1024 {
		t.Fatalf("msgs %d bytes %d err %v", res.Msgs, res.Bytes, err)
	}
	if _, err := RunReplay(context.Background(), &fakeReader{left: 10}, 1000, Hooks{}); err == nil {
		t.Fatal("a short log replayed without error")
	}
}

func TestPayloadsAreSeededAndCycle(t *testing.T) {
	a, b := NewPayloads(7, 1000, 3), NewPayloads(7, 1000, 3)
	c := NewPayloads(8, 1000, 3)
	first := a.Next()
	if !bytes.Equal(first, b.Next()) {
		t.Fatal("same seed, different payloads")
	}
	if bytes.Equal(first, c.Next()) {
		t.Fatal("different seeds, same payload")
	}
	a.Next()
	a.Next()
	if !bytes.Equal(a.Next(), first) {
		t.Fatal("payloads do not cycle")
	}
	if len(first) != 1000 {
		t.Fatalf("payload of %d bytes, want 1000", len(first))
	}
}

// taggingProducer records the tag of every message and acknowledges at
// once.
type taggingProducer struct {
	fakeProducer
	mu   sync.Mutex
	tags []string
	docs [][]byte
}

func (p *taggingProducer) SendTagged(b []byte, tag string, done func(error)) {
	p.mu.Lock()
	p.tags = append(p.tags, tag)
	p.docs = append(p.docs, b)
	p.mu.Unlock()
	done(nil)
}

func TestTaggedRunSendsJSONNamingEachTagInTurn(t *testing.T) {
	const tags, n = 10, 95
	p := &taggingProducer{}
	res, err := RunAsync(context.Background(), []Producer{p}, Params{Size: 1024, Window: 1, Count: n, Tags: tags}, Hooks{})
	if err != nil || res.Msgs != n {
		t.Fatalf("RunAsync: %d messages, %v", res.Msgs, err)
	}
	kept := int64(0)
	for i, tag := range p.tags {
		if want := TagName(i % tags); tag != want {
			t.Fatalf("message %d tagged %q, want %q", i, tag, want)
		}
		var doc struct{ Site, Data string }
		if err := json.Unmarshal(p.docs[i], &doc); err != nil || doc.Site != tag || len(p.docs[i]) != 1024 {
			t.Fatalf("message %d: %d bytes, site %q (tag %q), %v", i, len(p.docs[i]), doc.Site, tag, err)
		}
		if tag == TagName(3) {
			kept++
		}
	}
	if got := TaggedCount(n, tags, 3); got != kept {
		t.Fatalf("TaggedCount(%d, %d, 3) = %d, counted %d", n, tags, got, kept)
	}
	if got := TaggedCount(2, tags, 3); got != 0 {
		t.Fatalf("TaggedCount(2, %d, 3) = %d, want 0", tags, got)
	}
}

func TestTaggedRunRefusesAProducerThatCannotTag(t *testing.T) {
	p := newFake(false)
	defer p.Close()
	if _, err := RunAsync(context.Background(), []Producer{p}, Params{Size: 1024, Window: 1, Count: 1, Tags: 10}, Hooks{}); err == nil {
		t.Fatal("RunAsync sent tagged messages through a producer without SendTagged")
	}
}
