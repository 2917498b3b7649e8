package plugins

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// background keeps calling well-behaved plugins on other instances while a
// hostile plugin misbehaves, and counts its successes.
type background struct {
	h       *Host
	gate    sync.RWMutex // held for writing to pause the workers
	mu      sync.Mutex
	cond    *sync.Cond
	ok      int
	errs    []error
	stop    chan struct{}
	stopped sync.WaitGroup
}

func startBackground(t *testing.T, h *Host) *background {
	b := &background{h: h, stop: make(chan struct{})}
	b.cond = sync.NewCond(&b.mu)
	jsonView := testView(t, 0, batchOf(t, 0, values(`{"a":"x"}`, `{"a":"y"}`, `{"a":"x"}`)...))
	cpView := testView(t, 0, batchOf(t, 0, testRecord{value: "v", headers: map[string]string{"checkpoint": "1"}}))
	work := []func() error{
		func() error {
			keep, err := h.Filter(context.Background(), "json", Params{"field": "a", "equals": "x"}, jsonView)
			if err == nil && keep.Count() != 2 {
				err = errors.New("json filter kept the wrong records")
			}
			return err
		},
		func() error {
			p, err := h.Propose(context.Background(), "checkpoint", nil, cpView)
			if err == nil && !p.Commit {
				err = errors.New("checkpoint proposed nothing")
			}
			return err
		},
	}
	for _, w := range work {
		b.stopped.Add(1)
		go func() {
			defer b.stopped.Done()
			for {
				select {
				case <-b.stop:
					return
				default:
				}
				b.gate.RLock()
				err := w()
				b.gate.RUnlock()
				b.mu.Lock()
				if err != nil {
					b.errs = append(b.errs, err)
				} else {
					b.ok++
				}
				b.cond.Broadcast()
				b.mu.Unlock()
			}
		}()
	}
	t.Cleanup(func() {
		close(b.stop)
		b.stopped.Wait()
		if len(b.errs) > 0 {
			t.Errorf("background calls failed: %v", b.errs)
		}
	})
	return b
}

// progress waits until n more background calls succeeded.
func (b *background) progress(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	target := b.ok + n
	for b.ok < target && len(b.errs) == 0 {
		b.cond.Wait()
	}
}

func (b *background) pause()  { b.gate.Lock() }
func (b *background) resume() { b.gate.Unlock() }

// hostileEnv is a host with well-behaved plugins under load from the
// background and a clock the test moves.
type hostileEnv struct {
	t     *testing.T
	h     *Host
	clock *testClock
	logs  *logSink
	bg    *background
}

func newHostileEnv(t *testing.T) *hostileEnv {
	clock := newTestClock()
	logs := &logSink{}
	h := newTestHost(t, Config{
		Now:               clock.Now,
		Logger:            slogNew(logs),
		MaxInstanceMemory: 32 << 20,
		MaxStrikes:        1 << 20, // quarantine has its own test
		// Workers for the spinning guest and the background's two plugins:
		// with fewer, the background's calls queue behind the spinner
		// (TestWorkersBoundConcurrentCalls).
		MaxConcurrentCalls: 3,
	})
	mustAdd(t, h, "json", KindFilter, goModule(t, jsonFilterPkg))
	mustAdd(t, h, "checkpoint", KindCommitPolicy, goModule(t, checkpointPkg))
	return &hostileEnv{t: t, h: h, clock: clock, logs: logs, bg: startBackground(t, h)}
}

// runaway runs call, which must spin inside a guest: once the guest has
// logged signal, it checks that the background keeps being served and
// that a garbage collection (a stop-the-world) completes while the guest
// spins, then moves the clock past every deadline and returns the call's
// error.
func (e *hostileEnv) runaway(signal string, call func() error) error {
	e.t.Helper()
	spinning := e.logs.wait(signal)
	errc := make(chan error, 1)
	go func() { errc <- call() }()
	select {
	case <-spinning:
	case err := <-errc:
		e.t.Fatalf("the call returned before spinning: %v", err)
	}
	e.bg.progress(5)
	gcDone := make(chan struct{})
	go func() { runtime.GC(); close(gcDone) }()
	<-gcDone // never returns if the spinning guest blocked the stop-the-world
	e.bg.progress(5)
	select {
	case err := <-errc:
		e.t.Fatalf("the call ended before its deadline: %v", err)
	default:
	}
	e.bg.pause()
	e.clock.Advance(time.Hour)
	err := <-errc
	e.bg.resume()
	e.bg.progress(5)
	return err
}

func expectErr(t *testing.T, err, target error, substr string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Fatalf("error %q does not say %q", err, substr)
	}
}

var hostileView3 = func(t testing.TB) *View {
	return testView(t, 40, batchOf(t, 40, values("a", "b", "c")...))
}

// Guests that never return are cut off at their deadline; the process
// keeps serving other plugins and garbage collections complete meanwhile.
func TestHostileRunaways(t *testing.T) {
	e := newHostileEnv(t)
	ctx := context.Background()
	v := hostileView3(t)
	mustAdd(t, e.h, "hostile", KindFilter, goModule(t, hostilePkg))

	t.Run("go guest spins in its filter", func(t *testing.T) {
		err := e.runaway("INFO spinning", func() error {
			_, err := e.h.Filter(ctx, "hostile", Params{"do": "spin"}, v)
			return err
		})
		expectErr(t, err, ErrTimeout, "ledge_filter ran past its deadline of 100ms")
	})

	logSpin := func(body []byte) *tModule {
		m := abiModule(cat(i32c(1), i32c(0), i32c(8), []byte{opCall, 0}, body, i32c(0)), nil)
		m.imports = []tImport{{"ledge", "log", sig(tI32, tI32, tI32)()}}
		m.data = []tData{{0, []byte("spinning")}}
		return m
	}
	t.Run("loop without calls", func(t *testing.T) {
		mustAdd(t, e.h, "loop", KindFilter, logSpin(loopForever).encode())
		err := e.runaway("spinning", func() error { _, err := e.h.Filter(ctx, "loop", nil, v); return err })
		expectErr(t, err, ErrTimeout, "deadline")
	})
	t.Run("bulk memory in a loop", func(t *testing.T) {
		// loop: memory.fill(0, 0, memory.size*65536); br 0
		fill := cat([]byte{opLoop, blockEmpty}, i32c(0), i32c(0),
			[]byte{opMemorySize, 0}, i32c(65536), []byte{opI32Mul}, []byte{0xFC, 11, 0}, []byte{opBr, 0, opEnd})
		mustAdd(t, e.h, "fill", KindFilter, logSpin(fill).encode())
		err := e.runaway("spinning", func() error { _, err := e.h.Filter(ctx, "fill", nil, v); return err })
		expectErr(t, err, ErrTimeout, "deadline")
	})
	t.Run("go guest spins in its init", func(t *testing.T) {
		err := e.runaway("spinning in init", func() error {
			_, err := e.h.Filter(ctx, "hostile", Params{"do": "init-spin"}, v)
			return err
		})
		expectErr(t, err, ErrTimeout, "ledge_init ran past its deadline of 1s")
	})
	st, _ := e.h.Stat("hostile")
	if st.Stats.Timeouts != 2 || st.Stats.Strikes != 2 {
		t.Errorf("hostile stats after two timeouts: %+v", st.Stats)
	}
	for _, name := range []string{"json", "checkpoint"} {
		if st, _ := e.h.Stat(name); st.Stats.Strikes != 0 || st.Stats.Failures != 0 {
			t.Errorf("%s was hurt by its neighbours: %+v", name, st.Stats)
		}
	}
}

// Guests that trap or answer nonsense fail their call with a clear error.
func TestHostileFailures(t *testing.T) {
	e := newHostileEnv(t)
	ctx := context.Background()
	v := hostileView3(t)
	mustAdd(t, e.h, "hostile", KindFilter, goModule(t, hostilePkg))
	mustAdd(t, e.h, "hostile-policy", KindCommitPolicy, goModule(t, hostilePkg))

	recurse := abiModule(nil, nil)
	recurse.funcs = append(recurse.funcs, tFunc{typ: sig(tI32, tI32)(tI32), export: "ledge_filter",
		body: cat(localGet(0), localGet(1), []byte{opCall, 3})}) // calls itself
	growBomb := abiModule(cat([]byte{opLoop, blockEmpty}, i32c(1), []byte{opMemoryGrow, 0}, i32c(-1),
		[]byte{opI32Ne, opBrIf, 0, opEnd, opUnreachable}), nil)
	strayBits := abiModule(cat(answerAddr, i32c(0xFF), []byte{opI32Store8, 0, 0}, bitmapSizeOfInput), nil)
	shortBitmap := abiModule(cat(bitmapSizeOfInput, i32c(1), []byte{0x6B}), nil) // i32.sub
	oversized := abiModule(i32c(1<<20), nil)
	positive := abiModule(i32c(0), nil)
	positive.funcs[2].body = i32c(7) // init returns 7
	badDecision := abiModule(nil, cat(answerAddr, i32c(7), []byte{opI32Store, 2, 0}, i32c(16)))
	farBuffer := abiModule(i32c(0), nil)
	farBuffer.funcs[1].body = i32c(0x7FFF0000)
	badSpan := abiModule(cat(i32c(1), i32c(-16), i32c(64), []byte{opCall, 0}, i32c(0)), nil)
	badSpan.imports = []tImport{{"ledge", "log", sig(tI32, tI32, tI32)()}}
	helperOutside := abiModule(i32c(0), nil)
	helperOutside.imports = []tImport{{"ledge", "match_contains", sig(tI32, tI32, tI32)(tI32)}}
	helperOutside.funcs[2].body = cat(i32c(0), i32c(0), i32c(0), []byte{opCall, 0}) // in ledge_init

	for _, tc := range []struct {
		name   string
		module *tModule // nil: the Go hostile plugin
		kind   Kind
		params Params
		err    error
		says   string
	}{
		{"go panic", nil, KindFilter, Params{"do": "panic"}, ErrTrap, "assignment to entry in nil map"},
		{"go exit", nil, KindFilter, Params{"do": "exit"}, ErrTrap, "exited with code 3"},
		{"go memory bomb", nil, KindFilter, Params{"do": "alloc"}, ErrMemoryLimit, "grew its memory past 32 MiB, the limit of one instance; ledge_filter then failed"},
		{"unreachable", abiModule([]byte{opUnreachable, i32c(0)[0], 0}, nil), KindFilter, nil, ErrTrap, "unreachable"},
		{"stack overflow", recurse, KindFilter, nil, ErrTrap, "stack overflow"},
		{"memory.grow bomb", growBomb, KindFilter, nil, ErrMemoryLimit, "grew its memory past 32 MiB, the limit of one instance; ledge_filter then failed: wasm error: unreachable"},
		{"stray bits in the bitmap", strayBits, KindFilter, nil, ErrInvalidAnswer, "sets bits past record 2"},
		{"short bitmap", shortBitmap, KindFilter, nil, ErrInvalidAnswer, "bitmap of 0 bytes for 3 records"},
		{"oversized answer", oversized, KindFilter, nil, ErrInvalidAnswer, "answered 1048576 bytes"},
		{"init returns a positive code", positive, KindFilter, nil, ErrInvalidAnswer, "ledge_init returned 7"},
		{"unknown proposal decision", badDecision, KindCommitPolicy, nil, ErrInvalidAnswer, "decision 7"},
		{"proposal past the delivered range", nil, KindCommitPolicy, Params{"do": "past-next"}, ErrInvalidAnswer, "through offset 48, outside the delivered range [40, 43)"},
		{"proposal before the delivered range", nil, KindCommitPolicy, Params{"do": "before-from"}, ErrInvalidAnswer, "through offset 39"},
		{"buffer outside memory", farBuffer, KindFilter, nil, ErrInvalidAnswer, "outside the plugin's memory"},
		{"host call with a span outside memory", badSpan, KindFilter, nil, ErrTrap, "ledge.log: span"},
		{"batch helper outside a call", helperOutside, KindFilter, nil, ErrTrap, "ledge.match_contains called outside ledge_filter"},
		{"guest error", nil, KindFilter, Params{"do": "error"}, ErrPluginFailed, "bad input at offset 40"},
		{"no file system", nil, KindFilter, Params{"do": "file"}, ErrPluginFailed, "reading a file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "hostile"
			if tc.kind == KindCommitPolicy {
				name = "hostile-policy"
			}
			if tc.module != nil {
				name = strings.ReplaceAll(tc.name, " ", "-")
				mustAdd(t, e.h, name, tc.kind, tc.module.encode())
			}
			var err error
			if tc.kind == KindFilter {
				_, err = e.h.Filter(ctx, name, tc.params, v)
			} else {
				_, err = e.h.Propose(ctx, name, tc.params, v)
			}
			expectErr(t, err, tc.err, tc.says)
			e.bg.progress(3)
		})
	}
	// The hostile plugin still serves well-formed calls: each failure
	// discarded only its own instance.
	keep, err := e.h.Filter(ctx, "hostile", Params{"do": "ok"}, v)
	if err != nil || keep.Count() != 3 {
		t.Errorf("after the failures: %v, %v", keep, err)
	}
	// Sleeping in a guest does not wait: the clock is virtual.
	if _, err := e.h.Filter(ctx, "hostile", Params{"do": "sleep"}, v); err != nil {
		t.Errorf("sleep: %v", err)
	}
	// A chatty guest is cut off at the log limit.
	if _, err := e.h.Filter(ctx, "hostile", Params{"do": "chatty"}, v); err != nil {
		t.Errorf("chatty: %v", err)
	}
	if logs := e.logs.all(); !strings.Contains(logs, "plugin log limit reached") || strings.Contains(logs, "line 9999") {
		t.Errorf("the log limit did not hold")
	}
	// A guest collecting its own garbage many times is fine.
	if _, err := e.h.Filter(ctx, "hostile", Params{"do": "gc"}, v); err != nil {
		t.Errorf("gc: %v", err)
	}
}

// Modules refused when added, each with an error naming the problem.
func TestHostileModules(t *testing.T) {
	e := newHostileEnv(t)
	ctx := context.Background()
	good := goModule(t, jsonFilterPkg)

	withImport := func(im tImport) []byte {
		m := abiModule(i32c(0), nil)
		m.imports = []tImport{im}
		return m.encode()
	}
	command := abiModule(i32c(0), nil)
	command.funcs = append(command.funcs, tFunc{typ: sig()(), export: "_start"})
	noBuffer := abiModule(i32c(0), nil)
	noBuffer.funcs[1].export = ""
	badType := abiModule(i32c(0), nil)
	badType.funcs[1] = tFunc{typ: sig()(tI32), body: i32c(0), export: "ledge_buffer"}
	version2 := abiModule(i32c(0), nil)
	version2.funcs[0].body = i32c(2)
	readsGlobal := abiModule(cat([]byte{0x23, 0}, []byte{opDrop}, i32c(0)), nil) // global.get 0: no globals
	bigMemory := abiModule(i32c(0), nil)
	bigMemory.memPages = 1000
	noMemoryExport := abiModule(i32c(0), nil)
	noMemoryExport.exportMem = false
	importedMemory := append([]byte(nil), abiModule(i32c(0), nil).encode()...)
	importedMemory = replaceImports(t, importedMemory, []byte{1, 3, 'e', 'n', 'v', 3, 'm', 'e', 'm', 2, 0, 1})

	for _, tc := range []struct {
		name string
		wasm []byte
		err  error
		says string
	}{
		{"import from another module", withImport(tImport{"env", "now", sig()(valI64)}), ErrImportRefused, `"env"."now": module "env" is not provided`},
		{"unknown host function", withImport(tImport{"ledge", "exec", sig()()}), ErrImportRefused, `module "ledge" has no function "exec"`},
		{"WASI function of the wrong type", withImport(tImport{"wasi_snapshot_preview1", "fd_write", sig()()}), ErrImportRefused, `"wasi_snapshot_preview1"."fd_write" has type () -> ()`},
		{"the metering module", withImport(tImport{meterModule, meterYield, sig()(valI64)}), ErrImportRefused, "reserved for the host"},
		{"imported memory", importedMemory, ErrImportRefused, `"env"."mem" is a memory`},
		{"truncated", good[:len(good)/2], ErrInvalidModule, "truncated"},
		{"not WebAssembly", []byte("#!/bin/sh\nrm -rf /\n"), ErrInvalidModule, "bad magic"},
		{"empty", nil, ErrInvalidModule, "bad magic"},
		{"a command", command.encode(), ErrInvalidModule, "WASI command"},
		{"missing export", noBuffer.encode(), ErrInvalidModule, `does not export "ledge_buffer"`},
		{"mistyped export", badType.encode(), ErrInvalidModule, `"ledge_buffer" has type () -> (i32), want (i32) -> (i32)`},
		{"another ABI version", version2.encode(), ErrInvalidModule, "ABI version 2"},
		{"touches globals it lacks", readsGlobal.encode(), ErrInvalidModule, "global 0 out of range"},
		{"memory over the instance limit", bigMemory.encode(), ErrInvalidModule, "starts with 1000 pages"},
		{"memory not exported", noMemoryExport.encode(), ErrInvalidModule, `does not export its memory`},
		{"over the size limit", make([]byte, 33<<20), ErrInvalidModule, "the limit is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.Add(ctx, "bad", KindFilter, tc.wasm)
			expectErr(t, err, tc.err, tc.says)
			if _, err := e.h.Stat("bad"); !errors.Is(err, ErrUnknownPlugin) {
				t.Errorf("a refused module was registered: %v", err)
			}
			e.bg.progress(3)
		})
	}
}

// replaceImports swaps the import section of a module for raw content.
func replaceImports(t *testing.T, wasm, imports []byte) []byte {
	t.Helper()
	out := append([]byte(nil), wasm[:8]...)
	r := &wasmReader{b: wasm, pos: 8}
	for !r.done() {
		id := r.byte()
		content := r.bytes(uint64(r.u32()))
		if id == secFunction {
			out = appendSection(out, secImport, imports)
		}
		if id != secImport {
			out = appendSection(out, id, content)
		}
	}
	return out
}

// A module that takes too long to compile is abandoned; the host and its
// other plugins carry on.
func TestHostileSlowCompile(t *testing.T) {
	e := newHostileEnv(t)
	slow := newTestHost(t, Config{CacheDir: t.TempDir(), CompileTimeout: time.Millisecond})
	_, err := slow.Add(context.Background(), "slow", KindFilter, slowModule())
	expectErr(t, err, ErrCompileTimeout, "compil")
	e.bg.progress(5)
	// The compile slot is free again once wazero notices the cancellation.
	mustAdd(t, e.h, "after", KindFilter, abiModule(i32c(0), nil).encode())
}

// slowModule is valid but takes long to compile: many large functions.
func slowModule() []byte {
	m := abiModule(i32c(0), nil)
	body := []byte{}
	for i := 0; i < 400; i++ {
		body = append(body, cat(localGet(0), i32c(int32(i)), []byte{opI32Add, 0x21, 0})...) // local.set 0
	}
	body = append(body, localGet(0)...)
	for i := 0; i < 4000; i++ {
		m.funcs = append(m.funcs, tFunc{typ: sig(tI32)(tI32), body: body})
	}
	return m.encode()
}
