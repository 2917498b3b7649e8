package fleetload

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Params describe a fleet run.
type Params struct {
	Devices       int           // N connections
	Partitions    int           // P: device i produces to partition i mod P
	CmdPartitions int           // command partitions (Ledge): device i polls i mod CmdPartitions
	Size          int           // record size in bytes
	Interval      time.Duration // mean time between a device's records
	Jitter        float64       // each gap is Interval·(1 ± Jitter), uniform
	CmdRate       float64       // commands per second across the fleet
	Dialers       int           // connections set up at once
	Settle        time.Duration // after set-up, before the produce starts: polls park
	Warmup        time.Duration // producing, not recorded
	Duration      time.Duration // the measured phase
	Grace         time.Duration // after it, how long acknowledgements and commands may still arrive
	Seed          uint64
}

// Defaults fills the zero fields of p: 256 B records, one a second with
// ±20 % jitter, 4 partitions, 64 command partitions, 10 commands a second.
func (p Params) Defaults() Params {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&p.Devices, 200)
	set(&p.Partitions, 4)
	set(&p.CmdPartitions, 64)
	set(&p.Size, 256)
	set(&p.Dialers, 32)
	p.CmdPartitions = min(p.CmdPartitions, p.Devices)
	if p.Interval <= 0 {
		p.Interval = time.Second
	}
	if p.Jitter <= 0 || p.Jitter >= 1 {
		p.Jitter = 0.2
	}
	if p.CmdRate <= 0 {
		p.CmdRate = 10
	}
	if p.Settle <= 0 {
		p.Settle = 2 * time.Second
	}
	if p.Duration <= 0 {
		p.Duration = 20 * time.Second
	}
	if p.Grace <= 0 {
		p.Grace = 10 * time.Second
	}
	return p
}

// System is a node a fleet connects to.
type System interface {
	// Prepare creates what the fleet writes to and reads from, and a
	// credential per device.
	Prepare(ctx context.Context, p Params) error
	// Device connects device i on a connection of its own.
	Device(ctx context.Context, i int) (Device, error)
	// Controller connects the writer of commands.
	Controller(ctx context.Context) (Controller, error)
	Close() error
}

// Device is one connected device.
type Device interface {
	// Send writes payload asynchronously and calls done once with the
	// outcome. done must not block.
	Send(payload []byte, done func(error))
	// Commands waits for commands until ctx ends, calling got with each
	// payload that reaches the device (others' too, where the system
	// delivers them: the harness keeps its own). It returns when ctx
	// ends or the device's connection fails.
	Commands(ctx context.Context, got func(payload []byte)) error
	// Alive says whether the device's connection is still up.
	Alive() bool
	Close() error
}

// WakeCounter is a System whose node counts the parked polls it woke for
// commands (Ledge: the wake-ups of its key polls on the commands topic).
// Run reads it at the window's start and once its commands were
// delivered: their difference over the commands is the wake-ups per
// command, 1 when a command wakes its device alone.
type WakeCounter interface {
	// CommandWakeups returns the count so far; false when the node does
	// not say.
	CommandWakeups(ctx context.Context) (n uint64, ok bool, err error)
}

// GCCounter is a System that reads its node's garbage collections. Run
// reads them at the measured phase's start and end.
type GCCounter interface {
	// NodeGC returns the collections so far; false when the node does
	// not say.
	NodeGC(ctx context.Context) (s GCStats, ok bool, err error)
}

// BusyCounter is a Device that counts the busy answers it got: requests
// the node served nothing of, asking the device to retry after a while
// (docs/OPERATIONS.md, "Overload"). Run sums them over the measured
// phase.
type BusyCounter interface {
	Busy() uint64
}

// Controller writes commands.
type Controller interface {
	// Command writes payload for device i and returns once it is
	// acknowledged.
	Command(ctx context.Context, i int, payload []byte) error
	Close() error
}

// Hooks are called at the run's turning points (each may be nil).
type Hooks struct {
	Connected func() // every device connected and polling, before the produce
	Begin     func() // the measured phase starts
	End       func() // it ends
}

// Result is what a fleet run measured.
type Result struct {
	Devices   int
	Connected int           // devices whose connection was set up
	Held      int           // still up at the end
	Setup     time.Duration // from the first dial until every device was connected (or failed)
	Elapsed   time.Duration // the measured phase

	// SetupNode is what the set-up cost the node, where the System is a
	// SetupCounter that could say (SetupKnown).
	SetupNode  SetupStats
	SetupKnown bool

	Sent    int64 // records scheduled in the measured phase
	Records int64 // of them, acknowledged
	Produce *Latencies

	CmdSent      int64 // commands written in the measured phase
	CmdDelivered int64 // of them, seen by their device
	Command      *Latencies
	// CmdWakeups is how many parked polls the node woke from the window's
	// start until its commands were delivered; -1 when the System is no
	// WakeCounter or could not say.
	CmdWakeups int64

	// UDP is the machine's UDP counters over the measured phase, read
	// from /proc/net/snmp at its start and end (UDPKnown false where
	// they could not be): the whole machine's, so with the node and the
	// devices on one machine over loopback each datagram counts once in
	// OutDatagrams and once more in InDatagrams, and any other UDP
	// traffic of the machine counts too.
	UDP      UDPCounters
	UDPKnown bool
	// NodeGC is the node's collections over the measured phase, where the
	// System is a GCCounter that could say (GCKnown).
	NodeGC  GCRate
	GCKnown bool
	// Busy is the busy answers the devices got over the measured phase;
	// -1 when the devices do not count them (no BusyCounter).
	Busy int64

	Errors   int64  // failed dials, sends and commands; records and commands never answered
	FirstErr string // the first error, for the report
}

// WakeupsPerCommand is CmdWakeups over CmdSent; false when either is
// unknown or zero commands were sent.
func (r Result) WakeupsPerCommand() (float64, bool) {
	if r.CmdWakeups < 0 || r.CmdSent == 0 {
		return 0, false
	}
	return float64(r.CmdWakeups) / float64(r.CmdSent), true
}

// DatagramsPerRecord is the UDP datagrams sent over the measured phase
// (OutDatagrams: each crossing of loopback once) per record
// acknowledged; false when the counters are unknown or no record was.
func (r Result) DatagramsPerRecord() (float64, bool) {
	if !r.UDPKnown || r.Records == 0 {
		return 0, false
	}
	return float64(r.UDP.OutDatagrams) / float64(r.Records), true
}

// BusyPerMinute is Busy over the measured phase, a minute; false when
// unknown.
func (r Result) BusyPerMinute() (float64, bool) {
	if r.Busy < 0 || r.Elapsed <= 0 {
		return 0, false
	}
	return float64(r.Busy) / r.Elapsed.Minutes(), true
}

// SetupRate is connections set up per second.
func (r Result) SetupRate() float64 {
	if r.Setup <= 0 {
		return 0
	}
	return float64(r.Connected) / r.Setup.Seconds()
}

// Latencies are durations, kept to take percentiles from.
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *Latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// Count is how many durations there are.
func (l *Latencies) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

// Percentile returns the q-th percentile (0 to 100), or 0 with none.
func (l *Latencies) Percentile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	if !sort.SliceIsSorted(l.d, func(i, j int) bool { return l.d[i] < l.d[j] }) {
		sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	}
	i := int(q / 100 * float64(len(l.d)))
	return l.d[min(i, len(l.d)-1)]
}

// CommandSize is the size of a command: the device's number and the
// time it was written.
const CommandSize = 16

// gcPercent is the collector's setting while the devices produce: a heap
// five times the live one before the next collection.
const gcPercent = 400

// EncodeCommand is the payload of a command for device i written at t.
func EncodeCommand(i int, t time.Time) []byte {
	b := make([]byte, CommandSize)
	binary.BigEndian.PutUint64(b, uint64(i))
	binary.BigEndian.PutUint64(b[8:], uint64(t.UnixNano()))
	return b
}

// DecodeCommand reads a command's device and write time.
func DecodeCommand(b []byte) (int, time.Time, bool) {
	if len(b) != CommandSize {
		return 0, time.Time{}, false
	}
	return int(binary.BigEndian.Uint64(b)), time.Unix(0, int64(binary.BigEndian.Uint64(b[8:]))), true
}

// run is the state of one fleet run.
type run struct {
	p     Params
	res   *Result
	errs  atomic.Int64
	first sync.Once
	// window is the measured phase: records scheduled and commands
	// written in it are counted.
	begin, end                   time.Time
	sent, acked, cmdSent, cmdGot atomic.Int64
	sendErrs                     atomic.Int64 // failed sends of the window
	inflight                     sync.WaitGroup
}

func (r *run) fail(err error) {
	r.errs.Add(1)
	r.first.Do(func() { r.res.FirstErr = err.Error() })
}

func (r *run) inWindow(t time.Time) bool { return !t.Before(r.begin) && t.Before(r.end) }

// Run connects p.Devices devices to sys, lets their polls park, produces
// and commands for p.Warmup+p.Duration, and closes them.
func Run(ctx context.Context, sys System, p Params, h Hooks) (*Result, error) {
	p = p.Defaults()
	res := &Result{Devices: p.Devices, Produce: &Latencies{}, Command: &Latencies{}, CmdWakeups: -1, Busy: -1}
	r := &run{p: p, res: res}
	if err := sys.Prepare(ctx, p); err != nil {
		return nil, fmt.Errorf("fleet: prepare: %w", err)
	}
	devs := r.connect(ctx, sys)
	defer closeAll(devs)
	ctrl, err := sys.Controller(ctx)
	if err != nil {
		return nil, fmt.Errorf("fleet: controller: %w", err)
	}
	defer ctrl.Close()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for i, d := range devs {
		if d == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.listen(runCtx, i, d)
		}()
	}
	if !sleep(ctx, p.Settle) {
		return nil, context.Cause(ctx)
	}
	call(h.Connected)

	// Every device runs in this process, on the one CPU the harness gives
	// it, so one of its own collections stalls them all at once: at 5,000
	// devices a mark phase took 0.6 s of wall time with 0.3 s of assists,
	// and showed as a produce p99 of 0.8 s whatever the server did.
	// Collect now, and let the heap grow through the measured phase
	// (about 4 MB a second at 5,000 devices) instead of collecting in it.
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(gcPercent))

	start := time.Now()
	r.begin = start.Add(p.Warmup)
	r.end = r.begin.Add(p.Duration)
	for i, d := range devs {
		if d == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.produce(runCtx, i, d, start)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.command(runCtx, ctrl, devs, start)
	}()
	if !sleepUntil(ctx, r.begin) {
		return nil, context.Cause(ctx)
	}
	call(h.Begin)
	wakes0, wakesKnown := commandWakeups(ctx, sys)
	udp0, udpErr := ReadUDPCounters()
	gc0, gcKnown := nodeGC(ctx, sys)
	busy0, busyKnown := busyAnswers(devs)
	began := time.Now()
	if !sleepUntil(ctx, r.end) {
		return nil, context.Cause(ctx)
	}
	if udp1, err := ReadUDPCounters(); err == nil && udpErr == nil {
		res.UDP, res.UDPKnown = udp1.Sub(udp0), true
	}
	if gc1, ok := nodeGC(ctx, sys); ok && gcKnown {
		res.NodeGC, res.GCKnown = GCBetween(gc0, gc1, time.Since(began)), true
	}
	if busy1, ok := busyAnswers(devs); ok && busyKnown {
		res.Busy = int64(busy1 - busy0)
	}
	call(h.End)
	res.Elapsed = p.Duration

	// What was sent in the window has Grace to be answered.
	waited := make(chan struct{})
	go func() { r.inflight.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(p.Grace):
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	deadline := time.Now().Add(p.Grace)
	for r.cmdGot.Load() < r.cmdSent.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if wakes1, ok := commandWakeups(ctx, sys); ok && wakesKnown {
		res.CmdWakeups = int64(wakes1 - wakes0)
	}
	for _, d := range devs {
		if d != nil && d.Alive() {
			res.Held++
		}
	}
	stop()
	wg.Wait()

	res.Sent, res.Records = r.sent.Load(), r.acked.Load()
	res.CmdSent, res.CmdDelivered = r.cmdSent.Load(), r.cmdGot.Load()
	if lost := res.Sent - res.Records - int64(r.sendErrs.Load()); lost > 0 {
		r.fail(fmt.Errorf("%d records not acknowledged within %v", lost, p.Grace))
		r.errs.Add(lost - 1)
	}
	if lost := res.CmdSent - res.CmdDelivered; lost > 0 {
		r.fail(fmt.Errorf("%d commands not delivered within %v", lost, p.Grace))
		r.errs.Add(lost - 1)
	}
	res.Errors = r.errs.Load()
	return res, nil
}

// commandWakeups reads sys's wake-up count, if it keeps one.
func commandWakeups(ctx context.Context, sys System) (uint64, bool) {
	wc, ok := sys.(WakeCounter)
	if !ok {
		return 0, false
	}
	n, ok, err := wc.CommandWakeups(ctx)
	return n, ok && err == nil
}

// nodeGC reads sys's node's collections, if it says.
func nodeGC(ctx context.Context, sys System) (GCStats, bool) {
	gc, ok := sys.(GCCounter)
	if !ok {
		return GCStats{}, false
	}
	st, ok, err := gc.NodeGC(ctx)
	return st, ok && err == nil
}

// busyAnswers sums the busy answers of the devices that count them; false
// when none does.
func busyAnswers(devs []Device) (uint64, bool) {
	var n uint64
	known := false
	for _, d := range devs {
		if bc, ok := d.(BusyCounter); ok {
			n += bc.Busy()
			known = true
		}
	}
	return n, known
}
