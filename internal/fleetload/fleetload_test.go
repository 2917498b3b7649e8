package fleetload

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// fakeSystem acknowledges every record after a millisecond and delivers
// a command to its device after two; failDial devices cannot connect and
// deaf devices never see their commands.
type fakeSystem struct {
	failDial, deaf map[int]bool
	// busyOnce has each record answered busy once before it is taken.
	busyOnce bool
	mu       sync.Mutex
	devs     map[int]*fakeDevice
	records  atomic.Int64
}

func (s *fakeSystem) Prepare(context.Context, Params) error {
	s.devs = map[int]*fakeDevice{}
	return nil
}

func (s *fakeSystem) Device(_ context.Context, i int) (Device, error) {
	if s.failDial[i] {
		return nil, errors.New("refused")
	}
	d := &fakeDevice{sys: s, cmds: make(chan []byte, 16)}
	s.mu.Lock()
	s.devs[i] = d
	s.mu.Unlock()
	if s.busyOnce {
		return &busyDevice{fakeDevice: d}, nil
	}
	return d, nil
}

// busyDevice is a device whose every record the node first answered
// busy: it counts the answers, as a Ledge device's producer does.
type busyDevice struct {
	*fakeDevice
	busy atomic.Uint64
}

func (d *busyDevice) Send(b []byte, done func(error)) {
	d.busy.Add(1)
	d.fakeDevice.Send(b, done)
}

func (d *busyDevice) Busy() uint64 { return d.busy.Load() }

func (s *fakeSystem) Controller(context.Context) (Controller, error) { return fakeController{s}, nil }
func (s *fakeSystem) Close() error                                   { return nil }

type fakeDevice struct {
	sys  *fakeSystem
	cmds chan []byte
}

func (d *fakeDevice) Send(_ []byte, done func(error)) {
	d.sys.records.Add(1)
	time.AfterFunc(time.Millisecond, func() { done(nil) })
}

func (d *fakeDevice) Commands(ctx context.Context, got func([]byte)) error {
	for {
		select {
		case b := <-d.cmds:
			got(b)
		case <-ctx.Done():
			return nil
		}
	}
}

func (d *fakeDevice) Alive() bool  { return true }
func (d *fakeDevice) Close() error { return nil }

type fakeController struct{ s *fakeSystem }

func (c fakeController) Command(_ context.Context, i int, b []byte) error {
	if c.s.deaf[i] {
		return nil
	}
	c.s.mu.Lock()
	d := c.s.devs[i]
	c.s.mu.Unlock()
	time.AfterFunc(2*time.Millisecond, func() { d.cmds <- b })
	return nil
}

func (fakeController) Close() error { return nil }

func TestAFleetOf20CountsEveryRecordAndCommand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys := &fakeSystem{}
		res, err := Run(t.Context(), sys, Params{Devices: 20, Warmup: time.Second, Duration: 10 * time.Second, CmdRate: 10}, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Connected != 20 || res.Held != 20 || res.Errors != 0 {
			t.Fatalf("connected %d, held %d, errors %d (%s); want 20, 20, 0", res.Connected, res.Held, res.Errors, res.FirstErr)
		}
		// 20 devices at one record a second (±20 %) for 10 s.
		if res.Sent < 180 || res.Sent > 220 || res.Records != res.Sent || int64(res.Produce.Count()) != res.Sent {
			t.Fatalf("sent %d, acknowledged %d, timed %d; want about 200, all acknowledged and timed", res.Sent, res.Records, res.Produce.Count())
		}
		if res.CmdSent != 100 || res.CmdDelivered != 100 || res.Command.Count() != 100 {
			t.Fatalf("commands sent %d, delivered %d, timed %d; want 100 each", res.CmdSent, res.CmdDelivered, res.Command.Count())
		}
		if p := res.Produce.Percentile(99); p != time.Millisecond {
			t.Fatalf("produce p99 %v, want the fake's 1ms", p)
		}
		if p := res.Command.Percentile(50); p != 2*time.Millisecond {
			t.Fatalf("command p50 %v, want the fake's 2ms", p)
		}
	})
}

func TestAFleetCountsRefusedDevicesAndLostCommandsAsErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys := &fakeSystem{failDial: map[int]bool{3: true}, deaf: map[int]bool{}}
		for i := range 20 {
			sys.deaf[i] = i != 0
		}
		res, err := Run(t.Context(), sys, Params{Devices: 20, Duration: 5 * time.Second, CmdRate: 4, Grace: time.Second}, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Connected != 19 || res.Held != 19 {
			t.Fatalf("connected %d, held %d; want 19 (device 3 refused)", res.Connected, res.Held)
		}
		lost := res.CmdSent - res.CmdDelivered
		if lost == 0 || res.Errors != 1+lost {
			t.Fatalf("errors %d with %d commands lost: want the refused dial and each lost command", res.Errors, lost)
		}
	})
}

func TestHooksRunInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var order []string
		note := func(s string) func() { return func() { order = append(order, s) } }
		_, err := Run(t.Context(), &fakeSystem{}, Params{Devices: 2, Duration: time.Second},
			Hooks{Connected: note("connected"), Begin: note("begin"), End: note("end")})
		if err != nil {
			t.Fatal(err)
		}
		if len(order) != 3 || order[0] != "connected" || order[1] != "begin" || order[2] != "end" {
			t.Fatalf("hooks ran %v", order)
		}
	})
}

// Devices that count their busy answers have them summed over the
// measured phase, and reported a minute; devices that do not leave them
// unknown.
func TestAFleetCountsBusyAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res, err := Run(t.Context(), &fakeSystem{busyOnce: true}, Params{Devices: 20, Warmup: time.Second, Duration: 30 * time.Second}, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		// 20 devices at a record a second for 30 s, each record answered
		// busy once: about 600 in the window, 1,200 a minute.
		perMin, ok := res.BusyPerMinute()
		if !ok || res.Busy < 560 || res.Busy > 640 || perMin != float64(res.Busy)*2 {
			t.Fatalf("busy %d, %.0f a minute (known %v); want about 600, twice that a minute", res.Busy, perMin, ok)
		}
		plain, err := Run(t.Context(), &fakeSystem{}, Params{Devices: 2, Duration: time.Second}, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := plain.BusyPerMinute(); ok || plain.Busy != -1 {
			t.Fatalf("devices that count nothing: busy %d, known %v; want unknown", plain.Busy, ok)
		}
	})
}
