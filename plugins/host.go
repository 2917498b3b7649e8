package plugins

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/ledgemq/ledge/plugins/abi"
)

// Host runs plugins: it compiles modules when they are added, keeps pools
// of instances under a memory budget, and makes filter and propose calls
// under deadlines. All methods are safe for concurrent use.
type Host struct {
	cfg        Config
	rt         wazero.Runtime
	cache      wazero.CompilationCache
	compileSem chan struct{}

	lifetime context.Context // canceled by Close: aborts guest calls and compiles
	stop     context.CancelFunc

	mu       sync.Mutex
	closed   bool
	active   int // guest entries and compiles in progress; Close waits for them
	plugins  map[string]*plugin
	modules  map[Digest]*module
	used     int64         // linear memory of live instances, bytes (memory.go)
	peak     int64         // the most used has been
	released chan struct{} // closed and replaced whenever an instance is released or closed
	seq      uint64        // instance counter (seeds, LRU order)
	reaper   *time.Timer   // closes instances idle for IdleTimeout (pool.go); nil when none is idle
	pool     *workerPool   // the MaxConcurrentCalls workers (workerpool.go)
	giveBack atomic.Bool   // a return of freed Go memory to the OS is scheduled (memory.go)

	onQuarantine atomic.Pointer[func(name string, digest Digest, reason string)]
	compiles     atomic.Uint64 // modules compiled to machine code (not found in a cache)
	cacheDir     string        // Config.CacheDir
}

// module is a compiled module, shared by the plugins with its digest.
type module struct {
	digest   Digest
	size     int
	compiled wazero.CompiledModule
	info     *moduleInfo
	refs     int           // plugins and live instances using it; under Host.mu
	ready    chan struct{} // closed when compiled (or failed)
	err      error
}

// plugin is one named plugin.
type plugin struct {
	name  string
	kind  Kind
	mod   *module
	added time.Time
	stats statCounters
	slow  atomic.Bool  // a call ran slowYields slices or timed out (workers.go)
	quick atomic.Int32 // quick calls so far, up to quickCalls (workers.go)
	share workerShare  // its use of the workers, under Host.pool.mu (workerpool.go)

	// Under Host.mu.
	idle     []*instance
	live     int
	estBytes int64 // expected memory of a new instance
	memBytes int64 // memory of the live instances, as last measured
	removed  bool
	strikes  int
	quaran   bool
	reason   string // why it is quarantined
}

// Info describes a plugin.
type Info struct {
	Name   string
	Kind   Kind
	Digest Digest
	// Size is the size of the module in bytes.
	Size  int
	Added time.Time
	Stats Stats
}

// NewHost creates a host. ctx is used for setting up the runtime only.
func NewHost(ctx context.Context, cfg Config) (*Host, error) {
	cfg = cfg.withDefaults()
	if cfg.Seed == ([32]byte{}) {
		if _, err := rand.Read(cfg.Seed[:]); err != nil {
			return nil, fmt.Errorf("plugins: seeding: %w", err)
		}
	}
	rc := wazero.NewRuntimeConfigCompiler().
		WithCoreFeatures(api.CoreFeaturesV2).
		// No page limit of wazero's: the host's allocator enforces
		// MaxInstanceMemory and the budget, and says which refused (memory.go).
		WithCloseOnContextDone(false). // metering interrupts instead: RATIONALE.md
		WithDebugInfoEnabled(false)    // DWARF is dropped by the rewrite
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		var err error
		if cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir); err != nil {
			return nil, fmt.Errorf("plugins: compilation cache in %s: %w", cfg.CacheDir, err)
		}
		rc = rc.WithCompilationCache(cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	if err := instantiateHostModules(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	lifetime, stop := context.WithCancel(context.Background())
	return &Host{
		cacheDir:   cfg.CacheDir,
		lifetime:   lifetime,
		stop:       stop,
		cfg:        cfg,
		rt:         rt,
		cache:      cache,
		compileSem: make(chan struct{}, 1),
		plugins:    map[string]*plugin{},
		modules:    map[Digest]*module{},
		released:   make(chan struct{}),
		pool:       newWorkerPool(cfg.MaxConcurrentCalls),
	}, nil
}

// Close closes every instance and compiled module. Calls and compiles in
// progress are aborted (within one metering slice) and fail with
// ErrClosed, and Close waits for them: compiled code is never unmapped
// under a running guest. Later calls return ErrClosed.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.stop()
	if h.reaper != nil {
		h.reaper.Stop()
	}
	for h.active > 0 {
		wait := h.released
		h.mu.Unlock()
		<-wait
		h.mu.Lock()
	}
	h.signalLocked()
	h.mu.Unlock()
	h.pool.stop()
	err := h.rt.Close(ctx)
	if h.cache != nil {
		err = errors.Join(err, h.cache.Close(ctx))
	}
	return err
}

// validName reports whether a plugin name is usable: 1 to 255 bytes of
// letters, digits, '.', '_' and '-'.
func validName(name string) bool {
	if name == "" || len(name) > 255 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Add compiles wasm and registers it as plugin name of the given kind. It
// checks the module (size, structure, imports, exports, ABI version),
// compiles it (once per digest, with the on-disk cache), and starts one
// instance to prove it runs, kept idle for the first call (ReleaseIdle or
// the memory budget closes it). Adding a different module under an existing
// name replaces the plugin (its strikes and quarantine go with the old
// module); adding the same module again only clears its strikes and
// quarantine. Add is meant for the
// control path, never the request path: it can take as long as a compile.
func (h *Host) Add(ctx context.Context, name string, kind Kind, wasm []byte) (Digest, error) {
	return h.add(ctx, name, kind, wasm, true)
}

// Load is Add for a module that was added before (the node's registry
// loading its plugins after a restart): it checks and compiles the module
// (from the cache, usually) but starts no instance; the first call does.
// A module that no longer starts fails its calls, with strikes.
func (h *Host) Load(ctx context.Context, name string, kind Kind, wasm []byte) (Digest, error) {
	return h.add(ctx, name, kind, wasm, false)
}

func (h *Host) add(ctx context.Context, name string, kind Kind, wasm []byte, probe bool) (Digest, error) {
	if !validName(name) {
		return Digest{}, fmt.Errorf("%w: plugin name %q (use 1-255 letters, digits, '.', '_' or '-')", ErrBadParams, name)
	}
	if kind != KindFilter && kind != KindCommitPolicy && kind != KindTransform {
		return Digest{}, fmt.Errorf("%w: %v", ErrWrongKind, kind)
	}
	if len(wasm) > h.cfg.MaxModuleBytes {
		return Digest{}, fmt.Errorf("%w: %q is %d bytes, the limit is %d", ErrInvalidModule, name, len(wasm), h.cfg.MaxModuleBytes)
	}
	digest := Digest(sha256.Sum256(wasm))

	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return Digest{}, ErrClosed
	}
	if old := h.plugins[name]; old != nil && old.mod.digest == digest && old.kind == kind {
		// Adding the same module again is how an operator takes it out
		// of quarantine, as Reset does.
		old.strikes, old.quaran, old.reason = 0, false, ""
		h.mu.Unlock()
		return digest, nil
	}
	h.mu.Unlock()

	m, err := h.compile(ctx, digest, wasm)
	if err != nil {
		return Digest{}, fmt.Errorf("adding plugin %q: %w", name, err)
	}
	p := &plugin{name: name, kind: kind, mod: m, added: h.cfg.Now()}
	if mem := m.info.memory; mem != nil {
		p.estBytes = int64(mem.min) * pageSize
	}
	if !probe {
		// It started when it was first added; the exports at least
		// must still offer the kind (the first call checks the rest).
		if kindsOf(m.info)&int(kind) == 0 {
			h.releaseModule(m)
			return Digest{}, fmt.Errorf("adding plugin %q: %w: not a %v", name, ErrWrongKind, kind)
		}
	} else if err := h.probe(ctx, p); err != nil {
		h.releaseModule(m)
		return Digest{}, fmt.Errorf("adding plugin %q: %w", name, err)
	}

	h.mu.Lock()
	if h.closed {
		idle := h.retireLocked(p)
		h.mu.Unlock()
		closeAll(idle)
		return Digest{}, ErrClosed
	}
	old := h.plugins[name]
	h.plugins[name] = p
	var toClose []*instance
	if old != nil {
		toClose = h.retireLocked(old)
	}
	h.mu.Unlock()
	closeAll(toClose)
	h.cfg.Logger.Info("plugin added", "plugin", name, "kind", kind, "digest", digest, "bytes", len(wasm))
	return digest, nil
}

// Remove unregisters plugin name. Calls in progress finish; their
// instances are closed when released.
func (h *Host) Remove(name string) error {
	h.mu.Lock()
	p := h.plugins[name]
	if p == nil {
		h.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrUnknownPlugin, name)
	}
	delete(h.plugins, name)
	toClose := h.retireLocked(p)
	h.mu.Unlock()
	closeAll(toClose)
	h.cfg.Logger.Info("plugin removed", "plugin", name)
	return nil
}

// retireLocked marks p removed and takes its idle instances for closing;
// the module reference of p is dropped with its last instance.
func (h *Host) retireLocked(p *plugin) []*instance {
	p.removed = true
	idle := h.takeIdleLocked(p)
	h.maybeDropModuleLocked(p)
	h.signalLocked()
	return idle
}

// maybeDropModuleLocked drops p's module reference once p is removed (each
// live instance holds its own reference).
func (h *Host) maybeDropModuleLocked(p *plugin) {
	if p.removed && p.mod != nil {
		m := p.mod
		p.mod = nil
		h.unrefModuleLocked(m)
	}
}

// OnQuarantine sets fn to be called (on its own goroutine) whenever a
// plugin is quarantined, with its name, its module's digest and the
// reason, so that the quarantine can be recorded; nil unsets it.
func (h *Host) OnQuarantine(fn func(name string, digest Digest, reason string)) {
	if fn == nil {
		h.onQuarantine.Store(nil)
		return
	}
	h.onQuarantine.Store(&fn)
}

// Quarantine quarantines plugin name with the given reason, as if it had
// failed MaxStrikes times: a quarantine recorded before a restart is
// restored this way. OnQuarantine's function is not called.
func (h *Host) Quarantine(name, reason string) error {
	h.mu.Lock()
	p := h.plugins[name]
	if p == nil {
		h.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrUnknownPlugin, name)
	}
	p.strikes, p.quaran, p.reason = max(p.strikes, h.cfg.MaxStrikes), true, reason
	idle := h.takeIdleLocked(p)
	h.mu.Unlock()
	closeAll(idle)
	return nil
}

// Reset clears the strikes and the quarantine of plugin name: it serves
// calls again.
func (h *Host) Reset(name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.plugins[name]
	if p == nil {
		return fmt.Errorf("%w: %q", ErrUnknownPlugin, name)
	}
	p.strikes, p.quaran, p.reason = 0, false, ""
	return nil
}

// List describes every plugin, sorted by name.
func (h *Host) List() []Info {
	h.mu.Lock()
	ps := make([]*plugin, 0, len(h.plugins))
	for _, p := range h.plugins {
		ps = append(ps, p)
	}
	h.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool { return ps[i].name < ps[j].name })
	out := make([]Info, len(ps))
	for i, p := range ps {
		out[i] = h.info(p)
	}
	return out
}

// Stat describes plugin name.
func (h *Host) Stat(name string) (Info, error) {
	h.mu.Lock()
	p := h.plugins[name]
	h.mu.Unlock()
	if p == nil {
		return Info{}, fmt.Errorf("%w: %q", ErrUnknownPlugin, name)
	}
	return h.info(p), nil
}

func (h *Host) info(p *plugin) Info {
	st := p.stats.snapshot()
	h.mu.Lock()
	st.Strikes, st.Quarantined, st.QuarantineReason = p.strikes, p.quaran, p.reason
	st.Instances, st.IdleInstances = p.live, len(p.idle)
	st.MemoryPages, st.MaxMemoryPages = uint64(p.memBytes/pageSize), uint64(p.estBytes/pageSize)
	d, size := Digest{}, 0
	if p.mod != nil {
		d, size = p.mod.digest, p.mod.size
	}
	h.mu.Unlock()
	return Info{Name: p.name, Kind: p.kind, Digest: d, Size: size, Added: p.added, Stats: st}
}

// ReleaseIdle closes every idle instance, returning the host to its idle
// footprint (compiled code only). The next call of each plugin starts a
// new instance.
func (h *Host) ReleaseIdle() {
	h.mu.Lock()
	var toClose []*instance
	for _, p := range h.plugins {
		toClose = append(toClose, h.takeIdleLocked(p)...)
	}
	h.mu.Unlock()
	closeAll(toClose)
}

// compile meters and compiles wasm, once per digest: concurrent and later
// Adds of the same bytes share the result. The returned module carries a
// reference for the caller.
func (h *Host) compile(ctx context.Context, digest Digest, wasm []byte) (*module, error) {
	h.mu.Lock()
	if m := h.modules[digest]; m != nil {
		m.refs++
		h.mu.Unlock()
		<-m.ready
		if m.err != nil {
			h.releaseModule(m)
			return nil, m.err
		}
		return m, nil
	}
	m := &module{digest: digest, size: len(wasm), refs: 1, ready: make(chan struct{})}
	h.modules[digest] = m
	h.mu.Unlock()

	m.err = h.compileModule(ctx, m, wasm)
	close(m.ready)
	if m.err != nil {
		h.releaseModule(m)
		return nil, m.err
	}
	return m, nil
}

func (h *Host) compileModule(ctx context.Context, m *module, wasm []byte) error {
	metered, info, err := meter(wasm, allowImport)
	if err != nil {
		return err
	}
	if err := checkExports(info); err != nil {
		return err
	}
	if mem := info.memory; mem != nil && int64(mem.min)*pageSize > h.cfg.MaxInstanceMemory {
		return fmt.Errorf("%w: the module starts with %d pages (%d MiB) of memory, the per-instance limit is %d MiB",
			ErrInvalidModule, mem.min, int64(mem.min)*pageSize>>20, h.cfg.MaxInstanceMemory>>20)
	}
	m.info = info

	// Compiles run one at a time, so adding plugins never takes more than
	// CompileWorkers cores from serving. An abandoned compile (timeout,
	// caller gone, host closing) is canceled and keeps its slot until
	// wazero notices, between two functions.
	select {
	case h.compileSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("plugins: waiting to compile: %w", ctx.Err())
	}
	if err := h.enter(); err != nil {
		<-h.compileSem
		return err
	}
	cctx, cancel := context.WithTimeout(h.lifetime, h.cfg.CompileTimeout)
	stopOnCaller := context.AfterFunc(ctx, cancel)
	type result struct {
		cm  wazero.CompiledModule
		err error
	}
	done := make(chan result, 1)
	var abandoned atomic.Bool
	discard := func() { // whoever finds the result of an abandoned compile closes it
		select {
		case r := <-done:
			if r.cm != nil {
				_ = r.cm.Close(context.Background())
			}
		default:
		}
	}
	go func() {
		defer h.leave()
		defer func() { <-h.compileSem }()
		cached := h.cacheEntries()
		cm, err := h.rt.CompileModule(experimental.WithCompilationWorkers(cctx, h.cfg.CompileWorkers), metered)
		if err == nil && (cached < 0 || h.cacheEntries() > cached) {
			h.compiles.Add(1)
		}
		done <- result{cm, err}
		if abandoned.Load() {
			discard()
		}
	}()
	defer stopOnCaller()
	defer cancel()
	select {
	case r := <-done:
		switch {
		case r.err == nil:
			m.compiled = r.cm
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("plugins: compile abandoned: %w", ctx.Err())
		case h.lifetime.Err() != nil:
			return ErrClosed
		case cctx.Err() != nil:
			return fmt.Errorf("%w: after %v: %w", ErrCompileTimeout, h.cfg.CompileTimeout, r.err)
		}
		return fmt.Errorf("%w: %w", ErrInvalidModule, r.err)
	case <-cctx.Done():
		abandoned.Store(true)
		discard()
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("plugins: compile abandoned: %w", ctx.Err())
		case h.lifetime.Err() != nil:
			return ErrClosed
		}
		return fmt.Errorf("%w: still compiling after %v", ErrCompileTimeout, h.cfg.CompileTimeout)
	}
}

// Compiles counts the modules compiled to machine code since the host
// started. A module found in the compilation cache (Config.CacheDir) is
// loaded, not compiled, and not counted.
func (h *Host) Compiles() uint64 { return h.compiles.Load() }

// cacheEntries counts the compiled modules in the on-disk cache, or
// returns -1 without one. The runtime keeps them in a directory per
// runtime version, platform and CPU features, each file named by a hash of
// the (metered) module: a compile that found its module there adds none.
// Compiles run one at a time (compileSem), so a count before and after
// one tells whether it compiled.
func (h *Host) cacheEntries() int {
	if h.cacheDir == "" {
		return -1
	}
	dirs, err := os.ReadDir(h.cacheDir)
	if err != nil {
		return -1
	}
	n := 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		if files, err := os.ReadDir(filepath.Join(h.cacheDir, d.Name())); err == nil {
			for _, f := range files {
				if !strings.HasSuffix(f.Name(), ".tmp") {
					n++
				}
			}
		}
	}
	return n
}

// checkExports checks the ABI's exports: present when required, with
// their types.
func checkExports(info *moduleInfo) error {
	if e, ok := info.exports[abi.ExportMemory]; !ok || e.kind != 2 {
		return fmt.Errorf("%w: the module does not export its memory as %q", ErrInvalidModule, abi.ExportMemory)
	}
	if _, ok := info.exports[abi.ExportStart]; ok {
		if _, ok := info.exports[abi.ExportInitialize]; !ok {
			return fmt.Errorf("%w: the module is a WASI command (it exports %q); build it as a reactor "+
				"(Go: -buildmode=c-shared)", ErrInvalidModule, abi.ExportStart)
		}
	}
	i32 := byte(valI32)
	want := []struct {
		name     string
		typ      funcType
		required bool
	}{
		{abi.ExportABIVersion, sig()(i32), true},
		{abi.ExportBuffer, sig(i32)(i32), true},
		{abi.ExportInit, sig(i32, i32, i32)(i32), true},
		{abi.ExportKinds, sig()(i32), false},
		{abi.ExportFilter, sig(i32, i32)(i32), false},
		{abi.ExportPropose, sig(i32, i32)(i32), false},
		{abi.ExportTransform, sig(i32, i32, i32, i32)(byte(valI64)), false},
		{abi.ExportInitialize, sig()(), false},
	}
	for _, w := range want {
		e, ok := info.exports[w.name]
		switch {
		case !ok && w.required:
			return fmt.Errorf("%w: the module does not export %q (ABI version %d)", ErrInvalidModule, w.name, abi.Version)
		case ok && e.kind != 0:
			return fmt.Errorf("%w: export %q is not a function", ErrInvalidModule, w.name)
		case ok && !e.typ.equal(w.typ):
			return fmt.Errorf("%w: export %q has type %v, want %v", ErrInvalidModule, w.name, e.typ, w.typ)
		}
	}
	return nil
}

// kindsOf returns the kinds a module implements according to its exports.
func kindsOf(info *moduleInfo) int {
	k := 0
	if _, ok := info.exports[abi.ExportFilter]; ok {
		k |= abi.KindFilter
	}
	if _, ok := info.exports[abi.ExportPropose]; ok {
		k |= abi.KindCommitPolicy
	}
	if _, ok := info.exports[abi.ExportTransform]; ok {
		k |= abi.KindTransform
	}
	return k
}

// releaseModule drops a reference taken by compile.
func (h *Host) releaseModule(m *module) {
	h.mu.Lock()
	h.unrefModuleLocked(m)
	h.mu.Unlock()
}

func (h *Host) unrefModuleLocked(m *module) {
	m.refs--
	if m.refs > 0 {
		return
	}
	if h.modules[m.digest] == m {
		delete(h.modules, m.digest)
	}
	if m.compiled != nil {
		_ = m.compiled.Close(context.Background())
		h.scheduleGiveBack()
	}
}

// enter registers a guest entry or a compile, unless the host is closed.
func (h *Host) enter() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	h.active++
	return nil
}

// leave ends what enter registered.
func (h *Host) leave() {
	h.mu.Lock()
	h.active--
	h.signalLocked()
	h.mu.Unlock()
}

// signalLocked wakes the calls waiting for an instance or for memory.
func (h *Host) signalLocked() {
	close(h.released)
	h.released = make(chan struct{})
}

func closeAll(insts []*instance) {
	for _, in := range insts {
		in.close()
	}
}
