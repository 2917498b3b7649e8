package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/ledgemq/ledge/plugins/abi"
)

// instance is one instantiation of a plugin's module. It is used by one
// goroutine at a time: the pool hands it out exclusively.
type instance struct {
	h   *Host
	p   *plugin
	m   *module // referenced until close
	mod api.Module
	mem api.Memory
	gm  *guestMemory // the allocator of mem and its accounting

	abiVersion, kinds, buffer, init, filter, propose, transform api.Function

	ctx   context.Context // carries &cs for host functions
	cs    callState
	w     *worker // runs the guest code of the current entry (its call's turn)
	onW   bool    // on w's thread (workers.go)
	stack [4]uint64

	bufPtr, bufCap uint32 // the buffer the guest lent the host
	bound          bool   // init was called
	kind           Kind
	key            string // encoded parameters init was called with
	lastUse        uint64
	idleSince      time.Time // on the host's clock, while idle

	rng  *rand.ChaCha8
	mono int64 // virtual monotonic clock, ns
	log  pluginLog
}

// startInstance instantiates p's module with its memory from gm and runs
// the guest's own initialization, under StartTimeout. The instance holds
// a reference to the module.
func (h *Host) startInstance(ctx context.Context, t *turn, p *plugin, m *module, gm *guestMemory, seq uint64) (*instance, error) {
	var seed [32]byte
	{
		s := sha256.New()
		s.Write(h.cfg.Seed[:])
		s.Write(m.digest[:])
		s.Write(binary.LittleEndian.AppendUint64(nil, seq))
		s.Sum(seed[:0])
	}
	in := &instance{
		h:   h,
		p:   p,
		m:   m,
		gm:  gm,
		rng: rand.NewChaCha8(seed),
		log: newPluginLog(h.cfg.Logger.With("plugin", p.name), h.cfg.MaxLogBytes),
	}
	in.ctx = context.WithValue(context.Background(), callStateKey{}, &in.cs)
	if err := in.begin(ctx, t, h.cfg.StartTimeout, nil); err != nil {
		return nil, err
	}
	defer in.end()

	// Instantiation runs the module's start function, if it has one, under
	// the same deadline as _initialize.
	var mod api.Module
	err := in.w.run(in.onW, workerJob{run: func() (err error) {
		mod, err = h.rt.InstantiateModule(experimental.WithMemoryAllocator(in.ctx, gm), m.compiled,
			wazero.NewModuleConfig().WithName("").WithStartFunctions())
		return err
	}})
	if err != nil {
		return nil, in.classify(err, "starting")
	}
	in.mod, in.mem = mod, mod.Memory()
	fail := func(err error) (*instance, error) {
		_ = mod.Close(context.Background())
		return nil, err
	}
	if init := mod.ExportedFunction(abi.ExportInitialize); init != nil {
		if err := in.w.run(in.onW, workerJob{ctx: in.ctx, fn: init}); err != nil {
			return fail(in.classify(err, abi.ExportInitialize))
		}
	}
	in.abiVersion = mod.ExportedFunction(abi.ExportABIVersion)
	in.kinds = mod.ExportedFunction(abi.ExportKinds)
	in.buffer = mod.ExportedFunction(abi.ExportBuffer)
	in.init = mod.ExportedFunction(abi.ExportInit)
	in.filter = mod.ExportedFunction(abi.ExportFilter)
	in.propose = mod.ExportedFunction(abi.ExportPropose)
	in.transform = mod.ExportedFunction(abi.ExportTransform)

	v, err := in.callRaw(in.abiVersion)
	if err != nil {
		return fail(in.classify(err, abi.ExportABIVersion))
	}
	if int32(v) != abi.Version {
		return fail(fmt.Errorf("%w: %q implements ABI version %d, the host version %d", ErrInvalidModule, p.name, int32(v), abi.Version))
	}
	kinds := kindsOf(m.info)
	if in.kinds != nil {
		k, err := in.callRaw(in.kinds)
		if err != nil {
			return fail(in.classify(err, abi.ExportKinds))
		}
		kinds &= int(int32(k))
	}
	h.started(gm)
	if kinds&int(p.kind) == 0 {
		return fail(fmt.Errorf("%w: %q does not implement a %v (see %s and %s)", ErrWrongKind, p.name, p.kind,
			abi.ExportKinds, map[Kind]string{KindFilter: abi.ExportFilter, KindCommitPolicy: abi.ExportPropose, KindTransform: abi.ExportTransform}[p.kind]))
	}
	return in, nil
}

// begin prepares the call state for an entry into the guest, which the
// host's Close waits for. Unless the call already holds one (t), it
// waits for one of the MaxConcurrentCalls workers first, its plugin's
// turn (workerpool.go); the deadline starts once it has one.
func (in *instance) begin(ctx context.Context, t *turn, timeout time.Duration, v *View) error {
	if t.w == nil {
		w, err := in.h.pool.take(ctx, in.p, in.h.lifetime.Done())
		if err != nil {
			return err
		}
		t.w = w
	}
	if err := in.h.enter(); err != nil {
		return err
	}
	in.w, in.onW = t.w, in.p.onThreads()
	if in.onW {
		in.w.onThread()
	}
	_ = in.gm.takeRefusal()
	// The deadline is on the host's clock; the caller's own deadline, on
	// the wall clock, ends the call through ctx like a cancellation (not
	// held against the plugin) if it comes first.
	now := in.h.cfg.Now()
	deadline := now.Add(timeout)
	callerDeadline, ok := ctx.Deadline()
	in.cs = callState{
		inst:        in,
		ctx:         ctx,
		now:         in.h.cfg.Now,
		deadline:    deadline,
		callerFirst: ok && time.Until(callerDeadline) < timeout,
		start:       now,
		monoAt:      in.mono,
		view:        v,
		closing:     in.h.lifetime.Done(),
	}
	in.log.begin()
	return nil
}

// end finishes a call: unended output lines are logged.
func (in *instance) end() {
	in.log.flush(&in.cs)
	in.cs.view = nil
	in.cs.ctx = nil
	in.h.leave()
	in.h.pool.charge(in.p, int64(in.cs.yields)+1)
	in.w = nil
}

// callRaw calls fn with args and returns its first result.
func (in *instance) callRaw(fn api.Function, args ...uint64) (uint64, error) {
	st := in.stack[:max(len(args), 1)]
	copy(st, args)
	if err := in.w.run(in.onW, workerJob{ctx: in.ctx, fn: fn, stack: st}); err != nil {
		return 0, err
	}
	return st[0], nil
}

// classify turns the error of a guest call into the host's error values.
func (in *instance) classify(err error, fn string) error {
	cs := &in.cs
	withStderr := func(msg string) string {
		if s := in.log.stderr(); s != "" {
			msg += "; the plugin's stderr: " + s
		}
		return msg
	}
	var exit *sys.ExitError
	switch {
	case errors.Is(err, errAbortTimeout):
		return fmt.Errorf("%w: %q: %s ran past its deadline of %v", ErrTimeout, in.p.name, fn, cs.deadline.Sub(cs.start))
	case errors.Is(err, errAbortClosed):
		return fmt.Errorf("%w: %q: %s abandoned", ErrClosed, in.p.name, fn)
	case errors.Is(err, errAbortCanceled):
		return fmt.Errorf("plugins: %q: %s abandoned by its caller, not held against the plugin (its own deadline is %v): %w",
			in.p.name, fn, cs.deadline.Sub(cs.start), context.Cause(cs.ctx))
	}
	if refused := in.gm.takeRefusal(); refused != nil {
		// The guest failed after memory.grow failed: that is the cause.
		detail := trimTrace(err.Error())
		if errors.As(err, &exit) {
			detail = fmt.Sprintf("exited with code %d", exit.ExitCode())
		}
		return fmt.Errorf("%w; %s then failed: %s", refused, fn, withStderr(detail))
	}
	if errors.As(err, &exit) {
		return fmt.Errorf("%w: %q: %s: the plugin exited with code %d%s", ErrTrap, in.p.name, fn, exit.ExitCode(), withStderr(""))
	}
	msg := trimTrace(err.Error())
	return fmt.Errorf("%w: %q: %s: %s", ErrTrap, in.p.name, fn, withStderr(msg))
}

// ensureBuffer makes sure the guest lent the host a buffer of n bytes.
func (in *instance) ensureBuffer(n int) error {
	if uint32(n) <= in.bufCap && in.bufCap > 0 {
		return nil
	}
	ptr, err := in.callRaw(in.buffer, uint64(n))
	if err != nil {
		return in.classify(err, abi.ExportBuffer)
	}
	p := uint32(ptr)
	if uint64(p)+uint64(n) > uint64(in.mem.Size()) {
		return fmt.Errorf("%w: %q: %s(%d) returned [%d, %d), outside the plugin's memory of %d bytes",
			ErrInvalidAnswer, in.p.name, abi.ExportBuffer, n, p, uint64(p)+uint64(n), in.mem.Size())
	}
	in.bufPtr, in.bufCap = p, uint32(n)
	return nil
}

// bind calls the guest's init with the kind and encoded parameters.
func (in *instance) bind(ctx context.Context, t *turn, kind Kind, params []byte) error {
	if err := in.begin(ctx, t, in.h.cfg.StartTimeout, nil); err != nil {
		return err
	}
	defer in.end()
	if err := in.ensureBuffer(max(len(params), 1)); err != nil {
		return err
	}
	if !in.mem.Write(in.bufPtr, params) {
		return in.bufferLost()
	}
	r, err := in.callRaw(in.init, uint64(kind), uint64(in.bufPtr), uint64(len(params)))
	if err != nil {
		return in.classify(err, abi.ExportInit)
	}
	if rc := int32(r); rc != 0 {
		return in.guestError(abi.ExportInit, rc)
	}
	in.bound, in.kind, in.key = true, kind, string(params)
	return nil
}

// bufferLost is the error when the lent buffer no longer fits the memory
// (memories cannot shrink, so only a broken guest gets here).
func (in *instance) bufferLost() error {
	return fmt.Errorf("%w: %q: the buffer [%d, %d) is outside the plugin's memory of %d bytes",
		ErrInvalidAnswer, in.p.name, in.bufPtr, uint64(in.bufPtr)+uint64(in.bufCap), in.mem.Size())
}

// guestError is the error of a guest that reported failure with code rc.
func (in *instance) guestError(fn string, rc int32) error {
	if rc > 0 {
		return fmt.Errorf("%w: %q: %s returned %d (0 or a negative error code expected)", ErrInvalidAnswer, in.p.name, fn, rc)
	}
	msg := in.cs.guestErr
	if msg == "" {
		msg = fmt.Sprintf("error code %d (the plugin gave no message)", rc)
	}
	return fmt.Errorf("%w: %q: %s: %s", ErrPluginFailed, in.p.name, fn, msg)
}

// run copies v into the guest, calls fn (filter or propose) and returns
// the answer bytes the guest reported, copied out of its memory.
func (in *instance) run(ctx context.Context, t *turn, fn api.Function, name string, v *View) ([]byte, error) {
	if err := in.begin(ctx, t, in.h.cfg.CallTimeout, v); err != nil {
		return nil, err
	}
	defer in.end()
	if err := in.ensureBuffer(len(v.region)); err != nil {
		return nil, err
	}
	if !in.mem.Write(in.bufPtr, v.region) {
		return nil, in.bufferLost()
	}
	r, err := in.callRaw(fn, uint64(in.bufPtr), uint64(len(v.region)))
	if err != nil {
		return nil, in.classify(err, name)
	}
	n := int32(r)
	if n < 0 {
		return nil, in.guestError(name, n)
	}
	aoff, acap := answerArea(v)
	if uint32(n) > acap {
		return nil, fmt.Errorf("%w: %q: %s answered %d bytes, the answer area holds %d", ErrInvalidAnswer, in.p.name, name, n, acap)
	}
	ans, ok := in.mem.Read(in.bufPtr+aoff, uint32(n))
	if !ok {
		return nil, fmt.Errorf("%w: %q: %s: the answer area is outside the plugin's memory", ErrInvalidAnswer, in.p.name, name)
	}
	return append([]byte(nil), ans...), nil
}

func answerArea(v *View) (off, n uint32) {
	a := v.abi.Answer()
	return uint32(len(v.region) - len(a)), uint32(len(a))
}

// close closes the wasm instance and drops its module reference. The pool
// has already taken it out of its accounting.
func (in *instance) close() {
	_ = in.mod.Close(context.Background())
	in.h.mu.Lock()
	in.h.unrefModuleLocked(in.m)
	in.h.mu.Unlock()
}

// trimTrace shortens a wazero error: no "recovered" note, and at most
// traceLines lines of its wasm stack trace.
func trimTrace(msg string) string {
	const traceLines = 12
	if i := strings.Index(msg, " (recovered by wazero)"); i >= 0 {
		rest := msg[i+len(" (recovered by wazero)"):]
		msg = msg[:i] + rest
	}
	lines := strings.Split(msg, "\n")
	if len(lines) > traceLines {
		lines = append(lines[:traceLines], fmt.Sprintf("\t... %d more lines", len(lines)-traceLines))
	}
	return strings.Join(lines, "\n")
}
