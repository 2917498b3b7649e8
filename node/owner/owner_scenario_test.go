package owner_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/record"
)

// scenarioBackend is the storage a scenario runs on: the in-memory fake, or
// the real engine.
type scenarioBackend interface {
	topic() fence.TopicID
	log() owner.PartitionLog
	meta() owner.Metadata
	// suspendNextRead makes the next read block at its file read; the
	// returned gate reports arrival and releases it.
	suspendNextRead() *ownertest.ReadGate
	// persist makes everything appended so far durable and evicts it from
	// memory, so polls read it from disk.
	persist(t testing.TB)
	// restart simulates a node restart (crash after the last sync).
	restart(t testing.TB)
	// lose and retain model a lossy recovery and retention; a backend that
	// cannot reproduce them fails the test.
	lose(t testing.TB, keptEnd, start uint64)
	retain(t testing.TB, start uint64)
	close()
}

// fakeBackend runs scenarios on ownertest.Log and ownertest.Meta.
type fakeBackend struct {
	m *ownertest.Meta
	l *ownertest.Log
}

func newFakeBackend() *fakeBackend {
	m := ownertest.NewMeta()
	return &fakeBackend{m: m, l: ownertest.NewLog(m, "t/0")}
}

func (b *fakeBackend) topic() fence.TopicID    { return ownertest.ScenarioTopic }
func (b *fakeBackend) log() owner.PartitionLog { return b.l }
func (b *fakeBackend) meta() owner.Metadata    { return b.m }
func (b *fakeBackend) persist(testing.TB)      {}
func (b *fakeBackend) close()                  {}

func (b *fakeBackend) suspendNextRead() *ownertest.ReadGate { return b.l.SuspendNextRead() }

func (b *fakeBackend) restart(testing.TB) {
	b.m = b.m.Restart()
	b.l.SetMeta(b.m)
}

func (b *fakeBackend) lose(_ testing.TB, keptEnd, start uint64) { b.l.Lose(keptEnd, start) }
func (b *fakeBackend) retain(_ testing.TB, start uint64)        { b.l.RetainFrom(start) }

// testMembers is a Members the scenarios set directly.
type testMembers map[string]fence.MemberEpoch

func (m testMembers) Member(group, member string) (bool, fence.MemberEpoch) {
	e, ok := m[group+"/"+member]
	return ok, e
}

// scenario is the state of one data-driven scenario.
type scenario struct {
	t       testing.TB
	ctx     context.Context
	b       scenarioBackend
	owner   *owner.Owner
	prods   *owner.Producers
	sess    *owner.Sessions
	members testMembers

	procs     map[string]owner.Consumer         // attached processes by handle
	tokens    map[string]fence.Token            // tokens of finished polls by handle
	polls     map[string]*asyncPoll             // polls in flight by handle
	producers map[string]owner.ProducerIdentity // producer incarnations by handle
	seqs      map[string]int32                  // next sequence per producer handle
	lastBatch map[string][]byte                 // last batch per producer handle
}

type asyncPoll struct {
	gate *ownertest.ReadGate
	done chan struct{}
	res  owner.PollResult
	err  error
}

func newScenario(t testing.TB, ctx context.Context, b scenarioBackend) *scenario {
	s := &scenario{
		t: t, ctx: ctx, b: b, members: testMembers{},
		procs: map[string]owner.Consumer{}, tokens: map[string]fence.Token{}, polls: map[string]*asyncPoll{},
		producers: map[string]owner.ProducerIdentity{}, seqs: map[string]int32{}, lastBatch: map[string][]byte{},
	}
	s.open()
	return s
}

func (s *scenario) open() {
	var err error
	if s.prods, err = owner.OpenProducers(s.b.meta()); err != nil {
		s.t.Fatal(err)
	}
	if s.sess, err = owner.OpenSessions(s.b.meta()); err != nil {
		s.t.Fatal(err)
	}
	s.owner, err = owner.NewOwner(owner.OwnerConfig{
		Topic: s.b.topic(), Log: s.b.log(), Meta: s.b.meta(),
		Producers: s.prods, Sessions: s.sess, Members: s.members,
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// run executes one command and renders its outcome.
func (s *scenario) run(d *datadriven.TestData) string {
	t := s.t
	switch d.Cmd {
	case "produce":
		return s.produce(d)
	case "init-producer":
		var name, as string
		d.MaybeScanArgs(t, "name", &name)
		d.ScanArgs(t, "as", &as)
		id, err := s.prods.Init(s.ctx, name)
		if err != nil {
			return "error: " + err.Error()
		}
		s.producers[as] = id
		return fmt.Sprintf("%s: id %d epoch %d", as, id.ID, id.Epoch)
	case "attach":
		var name, as string
		d.ScanArgs(t, "consumer", &name)
		d.ScanArgs(t, "as", &as)
		e, err := s.sess.Attach(s.ctx, name)
		if err != nil {
			return "error: " + err.Error()
		}
		s.procs[as] = owner.Consumer{Name: name, Session: e}
		return fmt.Sprintf("%s: consumer %s session %d", as, name, e)
	case "persist":
		s.b.persist(t)
		return "ok"
	case "poll":
		return s.poll(d)
	case "resume":
		p := s.poll1(d)
		if p.gate == nil {
			t.Fatalf("%s: poll was not suspended", d.Pos)
		}
		close(p.gate.Release)
		return s.await(d)
	case "await":
		return s.await(d)
	case "advance":
		var dur time.Duration
		var ds string
		d.ScanArgs(t, "by", &ds)
		dur, err := time.ParseDuration(ds)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(dur)
		synctest.Wait()
		return fmt.Sprintf("advanced %s", dur)
	case "purge":
		st, err := s.owner.Purge(s.ctx)
		if err != nil {
			return "error: " + err.Error()
		}
		synctest.Wait()
		return "purged: " + renderState(st)
	case "state":
		return renderState(s.owner.State())
	case "committed":
		pr, err := s.owner.Committed(s.ctx, s.consumer(d))
		if err != nil {
			return ownertest.RenderErr(err)
		}
		out := "no bookmark"
		if pr.HasCommitted {
			out = fmt.Sprintf("bookmark %d@h%d", pr.Committed.Offset, pr.Committed.History)
			if pr.Resolved.Moved {
				out += fmt.Sprintf(" (resolves to %d)", pr.Resolved.Offset)
			}
		}
		return out + fmt.Sprintf("; next %d", pr.Next)
	case "commit", "reset":
		var tokName string
		var off uint64
		d.ScanArgs(t, "token", &tokName)
		d.ScanArgs(t, "offset", &off)
		tok, ok := s.tokens[tokName]
		if !ok && tokName != "none" {
			t.Fatalf("%s: no token %q", d.Pos, tokName)
		}
		req := owner.CommitRequest{Consumer: s.consumer(d), Token: tok, Offset: off}
		var err error
		if d.Cmd == "commit" {
			err = s.owner.Commit(s.ctx, req)
		} else {
			err = s.owner.Reset(s.ctx, req)
		}
		if err != nil {
			return ownertest.RenderErr(err)
		}
		return "ok"
	case "restart":
		for name, p := range s.polls {
			t.Fatalf("%s: poll %s still in flight at restart", d.Pos, name)
			_ = p
		}
		s.b.restart(t)
		s.open()
		return "restarted"
	case "lose":
		var kept, start uint64
		d.ScanArgs(t, "kept", &kept)
		d.ScanArgs(t, "start", &start)
		s.b.lose(t, kept, start)
		s.open()
		return "recovered: " + renderState(s.owner.State())
	case "retain":
		var start uint64
		d.ScanArgs(t, "start", &start)
		s.b.retain(t, start)
		synctest.Wait()
		return renderState(s.owner.State())
	case "member":
		var group, member string
		var epoch uint64
		d.ScanArgs(t, "group", &group)
		d.ScanArgs(t, "member", &member)
		if d.HasArg("gone") {
			delete(s.members, group+"/"+member)
			return "ok"
		}
		d.ScanArgs(t, "epoch", &epoch)
		s.members[group+"/"+member] = fence.MemberEpoch(epoch)
		return "ok"
	case "assign":
		var group, member string
		var epoch uint64
		d.ScanArgs(t, "group", &group)
		if d.HasArg("none") {
			s.owner.Unassign(group)
			return "ok"
		}
		d.ScanArgs(t, "member", &member)
		d.ScanArgs(t, "epoch", &epoch)
		s.owner.Assign(group, member, fence.MemberEpoch(epoch))
		return "ok"
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}

// consumer parses who a command acts for: proc=HANDLE (an attached
// process), consumer=NAME [session=N], group=G member=M [epoch=N], or
// nobody (anonymous).
func (s *scenario) consumer(d *datadriven.TestData) owner.Consumer {
	var c owner.Consumer
	var proc string
	if d.MaybeScanArgs(s.t, "proc", &proc) {
		var ok bool
		if c, ok = s.procs[proc]; !ok {
			s.t.Fatalf("%s: no process %q", d.Pos, proc)
		}
		return c
	}
	d.MaybeScanArgs(s.t, "consumer", &c.Name)
	var session, epoch uint64
	d.MaybeScanArgs(s.t, "session", &session)
	c.Session = fence.SessionEpoch(session)
	if d.MaybeScanArgs(s.t, "group", &c.Name) {
		d.ScanArgs(s.t, "member", &c.Member)
		d.ScanArgs(s.t, "epoch", &epoch)
		c.MemberEpoch = fence.MemberEpoch(epoch)
	}
	return c
}

func (s *scenario) produce(d *datadriven.TestData) string {
	var b record.BatchBuilder
	var handle string
	if d.MaybeScanArgs(s.t, "producer", &handle) && d.HasArg("retry") {
		// Resend the producer's last batch byte for byte (a lost reply).
		return renderProduce(s.owner.Produce(s.ctx, append([]byte(nil), s.lastBatch[handle]...)))
	}
	arg, ok := d.Arg("values")
	if !ok {
		s.t.Fatalf("%s: produce needs values=(...)", d.Pos)
	}
	for _, v := range arg.Vals {
		b.Append(record.Record{Timestamp: 1, Value: []byte(v)})
	}
	if handle != "" {
		id, ok := s.producers[handle]
		if !ok {
			s.t.Fatalf("%s: no producer %q", d.Pos, handle)
		}
		seq := s.seqs[handle]
		if d.HasArg("seq") {
			var n int
			d.ScanArgs(s.t, "seq", &n)
			seq = int32(n)
		}
		b.SetProducer(uint64(id.ID), uint32(id.Epoch), seq)
		s.seqs[handle] = seq + int32(len(arg.Vals))
	}
	batch, err := b.Build(record.CompressionNone)
	if err != nil {
		s.t.Fatal(err)
	}
	if handle != "" {
		s.lastBatch[handle] = append([]byte(nil), batch...)
	}
	return renderProduce(s.owner.Produce(s.ctx, batch))
}

func renderProduce(r owner.ProduceResult, err error) string {
	if err != nil {
		return ownertest.RenderErr(err)
	}
	if r.Duplicate {
		return fmt.Sprintf("duplicate: already at %d-%d", r.Base, r.Last)
	}
	return fmt.Sprintf("appended %d-%d", r.Base, r.Last)
}

func (s *scenario) poll1(d *datadriven.TestData) *asyncPoll {
	var as string
	d.ScanArgs(s.t, "as", &as)
	p, ok := s.polls[as]
	if !ok {
		s.t.Fatalf("%s: no poll %q in flight", d.Pos, as)
	}
	return p
}

func (s *scenario) poll(d *datadriven.TestData) string {
	t := s.t
	req := owner.PollRequest{Consumer: s.consumer(d)}
	var from, auto, reset, wait, as string
	d.ScanArgs(t, "from", &from)
	switch from {
	case "next":
		req.From = owner.FromNext
	case "first":
		req.From = owner.FromFirst
	case "last":
		req.From = owner.FromLast
	case "end":
		req.From = owner.FromEnd
	default:
		req.From = owner.FromOffset
		if _, err := fmt.Sscan(from, &req.Offset); err != nil {
			t.Fatalf("%s: from=%q", d.Pos, from)
		}
	}
	if d.MaybeScanArgs(t, "auto", &auto) {
		switch auto {
		case "delivery":
			req.AutoCommit = owner.AutoCommitOnDelivery
		case "next-poll":
			req.AutoCommit = owner.AutoCommitOnNextPoll
		case "off":
		default:
			t.Fatalf("%s: auto=%q", d.Pos, auto)
		}
	}
	if d.MaybeScanArgs(t, "reset", &reset) {
		req.Reset = map[string]owner.ResetPolicy{"earliest": owner.ResetEarliest, "latest": owner.ResetLatest, "none": owner.ResetNone}[reset]
	}
	if d.MaybeScanArgs(t, "wait", &wait) {
		var err error
		if req.MaxWait, err = time.ParseDuration(wait); err != nil {
			t.Fatal(err)
		}
	}
	d.MaybeScanArgs(t, "max-bytes", &req.MaxBytes)
	d.MaybeScanArgs(t, "as", &as)
	p := &asyncPoll{done: make(chan struct{})}
	if d.HasArg("suspend") {
		p.gate = s.b.suspendNextRead()
	}
	go func() {
		defer close(p.done)
		p.res, p.err = s.owner.Poll(s.ctx, req)
	}()
	synctest.Wait()
	select {
	case <-p.done:
		if p.gate != nil {
			t.Fatalf("%s: poll finished without reaching its read", d.Pos)
		}
		if as != "" && p.err == nil {
			s.tokens[as] = p.res.Token
		}
		return ownertest.RenderPoll(p.res, p.err)
	default:
	}
	if as == "" {
		t.Fatalf("%s: a poll left in flight needs as=NAME", d.Pos)
	}
	s.polls[as] = p
	if p.gate != nil {
		select {
		case <-p.gate.Arrived:
			return "suspended at the file read"
		default:
			t.Fatalf("%s: poll blocked before its read", d.Pos)
		}
	}
	return "parked"
}

func (s *scenario) await(d *datadriven.TestData) string {
	var as string
	d.ScanArgs(s.t, "as", &as)
	p := s.poll1(d)
	synctest.Wait()
	select {
	case <-p.done:
	default:
		return "still in flight"
	}
	delete(s.polls, as)
	if p.err == nil {
		s.tokens[as] = p.res.Token
	}
	return ownertest.RenderPoll(p.res, p.err)
}

func renderState(p owner.PartitionState) string {
	return fmt.Sprintf("history %d, offsets [%d,%d)", p.History, p.LogStart, p.HighWatermark)
}

// runScenarios runs every file of testdata/owner on backends made by
// newBackend, each file in its own synctest bubble (time is fake; a
// suspended or parked poll is observed with synctest.Wait, never a sleep).
func runScenarios(t *testing.T, newBackend func(t testing.TB) scenarioBackend, skip func(path string) bool) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if skip != nil && skip(path) {
			t.Skip("the backend cannot reproduce this scenario")
		}
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			b := newBackend(t)
			s := newScenario(t, ctx, b)
			t.Cleanup(func() {
				for name, p := range s.polls {
					if p.gate != nil {
						close(p.gate.Release)
					}
					t.Errorf("poll %s still in flight at the end of the scenario", name)
				}
				cancel()
				synctest.Wait()
				b.close()
			})
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				s.t = t
				return s.run(d)
			})
		})
	})
}

func TestOwnerScenariosFake(t *testing.T) {
	runScenarios(t, func(testing.TB) scenarioBackend { return newFakeBackend() }, nil)
}
