package plugins

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAddListRemove(t *testing.T) {
	h := newTestHost(t, Config{})
	ctx := context.Background()
	wasm := goModule(t, jsonFilterPkg)
	d1, err := h.Add(ctx, "json", KindFilter, wasm)
	if err != nil {
		t.Fatal(err)
	}
	// The same module again is a no-op; under another name it shares the
	// compiled code.
	if d2, err := h.Add(ctx, "json", KindFilter, wasm); err != nil || d2 != d1 {
		t.Fatalf("re-add: %v %v", d2, err)
	}
	mustAdd(t, h, "json2", KindFilter, wasm)
	if n := len(h.modules); n != 1 {
		t.Errorf("%d compiled modules for one digest", n)
	}
	list := h.List()
	if len(list) != 2 || list[0].Name != "json" || list[1].Name != "json2" ||
		list[0].Digest != d1 || list[0].Kind != KindFilter || list[0].Size != len(wasm) {
		t.Fatalf("list: %+v", list)
	}
	if list[0].Stats.IdleInstances != 1 || list[0].Stats.MemoryPages == 0 {
		t.Errorf("the probe instance is not idle: %+v", list[0].Stats)
	}
	if err := h.Remove("json"); err != nil {
		t.Fatal(err)
	}
	if err := h.Remove("json"); !errors.Is(err, ErrUnknownPlugin) {
		t.Errorf("second remove: %v", err)
	}
	v := testView(t, 0, batchOf(t, 0, values(`{"a":1}`)...))
	if _, err := h.Filter(ctx, "json", Params{"field": "a", "equals": "1"}, v); !errors.Is(err, ErrUnknownPlugin) {
		t.Errorf("filter after remove: %v", err)
	}
	if keep, err := h.Filter(ctx, "json2", Params{"field": "a", "equals": "1"}, v); err != nil || keep.Count() != 1 {
		t.Errorf("json2 after removing json: %v %v", keep, err)
	}
	if err := h.Remove("json2"); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.modules) != 0 || h.used != 0 {
		t.Errorf("after removing everything: %d modules, %d bytes accounted", len(h.modules), h.used)
	}
	for _, bad := range []string{"", "a b", "x/y", strings.Repeat("n", 256)} {
		if _, err := h.Add(ctx, bad, KindFilter, wasm); !errors.Is(err, ErrBadParams) {
			t.Errorf("name %q: %v", bad, err)
		}
	}
}

func TestInstancesPerParams(t *testing.T) {
	h := newTestHost(t, Config{MaxInstances: 2})
	ctx := context.Background()
	mustAdd(t, h, "json", KindFilter, goModule(t, jsonFilterPkg))
	v := testView(t, 0, batchOf(t, 0, values(`{"a":"x"}`, `{"a":"y"}`)...))
	px, py := Params{"field": "a", "equals": "x"}, Params{"field": "a", "equals": "y"}
	for i := 0; i < 3; i++ {
		for _, p := range []Params{px, py} {
			keep, err := h.Filter(ctx, "json", p, v)
			if err != nil || keep.Count() != 1 {
				t.Fatalf("%v: %v %v", p, keep, err)
			}
		}
	}
	st, _ := h.Stat("json")
	// The probe became the x instance; y needed a second one; both were
	// reused afterwards.
	if st.Stats.Instantiations != 2 || st.Stats.Instances != 2 || st.Stats.Calls != 6 {
		t.Errorf("stats: %+v", st.Stats)
	}
	// A third parameter set at the instance limit replaces an idle one.
	if _, err := h.Filter(ctx, "json", Params{"field": "b", "equals": "z"}, v); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.Stat("json"); st.Stats.Instances != 2 || st.Stats.Instantiations != 3 {
		t.Errorf("after a third parameter set: %+v", st.Stats)
	}
	if _, err := h.Filter(ctx, "json", Params{"": "x"}, v); !errors.Is(err, ErrBadParams) {
		t.Errorf("empty key: %v", err)
	}
	if _, err := h.Filter(ctx, "json", Params{"k": strings.Repeat("v", 5000)}, v); !errors.Is(err, ErrBadParams) {
		t.Errorf("long value: %v", err)
	}
	h.ReleaseIdle()
	if st, _ := h.Stat("json"); st.Stats.Instances != 0 || st.Stats.MemoryPages != 0 {
		t.Errorf("after ReleaseIdle: %+v", st.Stats)
	}
}

func TestStats(t *testing.T) {
	clock := newTestClock()
	h := newTestHost(t, Config{Now: clock.Now})
	ctx := context.Background()
	mustAdd(t, h, "json", KindFilter, goModule(t, jsonFilterPkg))
	v := testView(t, 0, batchOf(t, 0, values(`{"a":"x"}`, `{"a":"y"}`, `{"a":"x"}`)...))
	for i := 0; i < 4; i++ {
		if _, err := h.Filter(ctx, "json", Params{"field": "a", "equals": "x"}, v); err != nil {
			t.Fatal(err)
		}
	}
	// An empty view is answered by the host.
	if keep, err := h.Filter(ctx, "json", Params{"field": "a", "equals": "x"}, testView(t, 5)); err != nil || keep.Len() != 0 {
		t.Fatalf("empty view: %v %v", keep, err)
	}
	st, _ := h.Stat("json")
	s := st.Stats
	if s.Calls != 4 || s.RecordsIn != 12 || s.RecordsOut != 8 || s.Failures != 0 || s.Instances != 1 {
		t.Errorf("stats: %+v", s)
	}
	if s.MemoryPages == 0 || s.MaxMemoryPages < s.MemoryPages {
		t.Errorf("memory pages: %+v", s)
	}
}

func TestQuarantine(t *testing.T) {
	h := newTestHost(t, Config{MaxStrikes: 3})
	ctx := context.Background()
	hostile := goModule(t, hostilePkg)
	mustAdd(t, h, "h", KindFilter, hostile)
	v := testView(t, 0, batchOf(t, 0, values("a")...))
	for i := 0; i < 3; i++ {
		if _, err := h.Filter(ctx, "h", Params{"do": "panic"}, v); !errors.Is(err, ErrTrap) {
			t.Fatalf("strike %d: %v", i+1, err)
		}
	}
	_, err := h.Filter(ctx, "h", Params{"do": "ok"}, v)
	expectErr(t, err, ErrQuarantined, "failed 3 times")
	st, _ := h.Stat("h")
	if !st.Stats.Quarantined || st.Stats.Traps != 3 || st.Stats.Strikes != 3 || st.Stats.Instances != 0 {
		t.Errorf("stats: %+v", st.Stats)
	}
	// An operator lifts the quarantine with Reset, or by adding the same
	// module again; a new module starts without strikes.
	if err := h.Reset("h"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Filter(ctx, "h", Params{"do": "ok"}, v); err != nil {
		t.Errorf("after a reset: %v", err)
	}
	if err := h.Quarantine("h", "restored"); err != nil {
		t.Fatal(err)
	}
	_, err = h.Filter(ctx, "h", Params{"do": "ok"}, v)
	expectErr(t, err, ErrQuarantined, "restored")
	if _, err := h.Add(ctx, "h", KindFilter, hostile); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Filter(ctx, "h", Params{"do": "ok"}, v); err != nil {
		t.Errorf("same module re-added: %v", err)
	}
	mustAdd(t, h, "h", KindFilter, goModule(t, jsonFilterPkg))
	if _, err := h.Filter(ctx, "h", Params{"field": "a", "equals": "b"}, v); err != nil {
		t.Errorf("replaced: %v", err)
	}
	if st, _ := h.Stat("h"); st.Stats.Strikes != 0 || st.Stats.Quarantined {
		t.Errorf("replaced plugin kept the old strikes: %+v", st.Stats)
	}
}

// The memory budget bounds all instances; idle ones are closed to make
// room, and a call that cannot get memory waits until its context ends.
func TestMemoryBudget(t *testing.T) {
	h := newTestHost(t, Config{})
	ctx := context.Background()
	wasm := goModule(t, jsonFilterPkg)
	mustAdd(t, h, "a", KindFilter, wasm)
	one := h.usedBytes()
	h.Close(ctx)

	// Room for one instance and a half: a second plugin's instance evicts
	// the first one's idle instance.
	h = newTestHost(t, Config{MemoryBudget: one * 3 / 2})
	mustAdd(t, h, "a", KindFilter, wasm)
	mustAdd(t, h, "b", KindFilter, wasm)
	sa, _ := h.Stat("a")
	sb, _ := h.Stat("b")
	if sa.Stats.Instances != 0 || sb.Stats.Instances != 1 {
		t.Fatalf("after adding b: a %+v, b %+v", sa.Stats, sb.Stats)
	}
	v := testView(t, 0, batchOf(t, 0, values(`{"k":1}`)...))
	p := Params{"field": "k", "equals": "1"}

	// Hold b's instance busy: a's call cannot start an instance and waits
	// until its context ends.
	var tn turn
	in, err := h.acquire(ctx, &tn, h.plugins["b"], KindFilter, mustEncode(t, p))
	h.pool.end(&tn, h.plugins["b"])
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := h.Filter(short, "a", p, v); errc <- err }()
	cancel()
	expectErr(t, <-errc, ErrMemoryBudget, "needs")
	// Once b's instance is released, a waiting call proceeds.
	go func() { _, err := h.Filter(ctx, "a", p, v); errc <- err }()
	h.release(in, false)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if used := h.usedBytes(); used > one*3/2 {
		t.Errorf("%d bytes in use, budget %d", used, one*3/2)
	}
}

func mustEncode(t testing.TB, p Params) []byte {
	t.Helper()
	b, err := p.encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Instances are never shared: many goroutines calling one plugin get
// correct answers, bounded by MaxInstances.
func TestConcurrentCalls(t *testing.T) {
	h := newTestHost(t, Config{MaxInstances: 3})
	ctx := context.Background()
	mustAdd(t, h, "json", KindFilter, goModule(t, jsonFilterPkg))
	mustAdd(t, h, "checkpoint", KindCommitPolicy, goModule(t, checkpointPkg))
	views := make([]*View, 8)
	for i := range views {
		recs := make([]testRecord, 50)
		for j := range recs {
			site := "a"
			if (i+j)%3 == 0 {
				site = "b"
			}
			recs[j] = testRecord{value: `{"site":"` + site + `"}`, headers: map[string]string{"checkpoint": "x"}}
		}
		views[i] = testView(t, uint64(i*100), batchOf(t, uint64(i*100), recs...))
	}
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				v := views[(g+i)%len(views)]
				keep, err := h.Filter(ctx, "json", Params{"field": "site", "equals": "b"}, v)
				if err != nil {
					errc <- err
					return
				}
				for j := 0; j < v.Len(); j++ {
					if keep.Kept(j) != ((int(v.From()/100)+j)%3 == 0) {
						errc <- errors.New("wrong answer under concurrency")
						return
					}
				}
				p, err := h.Propose(ctx, "checkpoint", nil, v)
				if err != nil || p.Through != v.Next()-1 {
					errc <- errors.Join(err, errors.New("wrong proposal under concurrency"))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if st, _ := h.Stat("json"); st.Stats.Instances > 3 {
		t.Errorf("%d instances, limit 3", st.Stats.Instances)
	}
}

func TestInputTooLarge(t *testing.T) {
	h := newTestHost(t, Config{MaxInputBytes: 4096})
	mustAdd(t, h, "json", KindFilter, goModule(t, jsonFilterPkg))
	recs := make([]testRecord, 100)
	for i := range recs {
		recs[i] = testRecord{value: strings.Repeat("x", 100)}
	}
	_, err := h.Filter(context.Background(), "json", Params{"field": "a", "equals": "b"}, testView(t, 0, batchOf(t, 0, recs...)))
	expectErr(t, err, ErrInputTooLarge, "poll fewer bytes")
	if st, _ := h.Stat("json"); st.Stats.Strikes != 0 {
		t.Errorf("a host limit counted a strike")
	}
}

// A caller giving up aborts the call without a strike.
func TestCallerCancels(t *testing.T) {
	logs := &logSink{}
	h := newTestHost(t, Config{Logger: slogNew(logs)})
	mustAdd(t, h, "h", KindFilter, goModule(t, hostilePkg))
	v := testView(t, 0, batchOf(t, 0, values("a")...))
	ctx, cancel := context.WithCancel(context.Background())
	spinning := logs.wait("INFO spinning")
	errc := make(chan error, 1)
	go func() { _, err := h.Filter(ctx, "h", Params{"do": "spin"}, v); errc <- err }()
	<-spinning
	cancel()
	err := <-errc
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if st, _ := h.Stat("h"); st.Stats.Strikes != 0 {
		t.Errorf("the caller's cancellation counted a strike: %+v", st.Stats)
	}
}

func TestClosedHost(t *testing.T) {
	h := newTestHost(t, Config{})
	ctx := context.Background()
	mustAdd(t, h, "json", KindFilter, goModule(t, jsonFilterPkg))
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	v := testView(t, 0, batchOf(t, 0, values("a")...))
	if _, err := h.Filter(ctx, "json", nil, v); !errors.Is(err, ErrClosed) {
		t.Errorf("filter after close: %v", err)
	}
	if _, err := h.Add(ctx, "x", KindFilter, goModule(t, jsonFilterPkg)); !errors.Is(err, ErrClosed) {
		t.Errorf("add after close: %v", err)
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{MaxInstanceMemory: 100000, MaxInputBytes: 1 << 30}.withDefaults()
	if c.MaxInstanceMemory != pageSize || c.MaxInputBytes != pageSize/2 || c.CallTimeout != 100*time.Millisecond ||
		c.CompileWorkers != 2 || c.MaxStrikes != 3 {
		t.Errorf("defaults: %+v", c)
	}
}
