package wan

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Emulator joins two TUN devices: every IP packet read from one is
// written to the other after half the round trip, unless it is dropped.
// It is netem's delay and loss in userspace, for kernels without netem.
type Emulator struct {
	a, b      *os.File
	cfg       Config
	wg        sync.WaitGroup
	forwarded atomic.Int64
	dropped   atomic.Int64
}

// NewEmulator opens the persistent TUN devices named a and b.
func NewEmulator(a, b string, cfg Config) (*Emulator, error) {
	fa, err := openTUN(a)
	if err != nil {
		return nil, err
	}
	fb, err := openTUN(b)
	if err != nil {
		fa.Close()
		return nil, err
	}
	return &Emulator{a: fa, b: fb, cfg: cfg}, nil
}

func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s: %w", name, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// Start forwards in both directions until Close.
func (e *Emulator) Start() {
	e.forward(e.a, e.b, e.cfg.Seed)
	e.forward(e.b, e.a, e.cfg.Seed+1)
}

type packet struct {
	due time.Time
	buf *[]byte // from the pool, cut to the packet's length
}

func (e *Emulator) forward(from, to *os.File, seed uint64) {
	delay := e.cfg.RTT / 2
	q := make(chan packet, 1<<16)
	// The pool holds pointers: a slice put in an interface is allocated.
	pool := sync.Pool{New: func() any { b := make([]byte, 65536); return &b }}
	e.wg.Add(2)
	go func() {
		defer e.wg.Done()
		defer close(q)
		r := rand.New(rand.NewPCG(seed, 0x77))
		for {
			buf := pool.Get().(*[]byte)
			n, err := from.Read((*buf)[:cap(*buf)])
			if err != nil {
				return
			}
			if r.Float64() < e.cfg.Loss {
				e.dropped.Add(1)
				pool.Put(buf)
				continue
			}
			*buf = (*buf)[:n]
			select {
			case q <- packet{due: time.Now().Add(delay), buf: buf}:
			default: // a full queue drops, like a full netem queue
				e.dropped.Add(1)
				*buf = (*buf)[:cap(*buf)]
				pool.Put(buf)
			}
		}
	}()
	go func() {
		defer e.wg.Done()
		// The delay is the same for every packet, so arrival order is
		// due order and one FIFO suffices.
		for p := range q {
			if d := time.Until(p.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := to.Write(*p.buf); err == nil {
				e.forwarded.Add(1)
			}
			*p.buf = (*p.buf)[:cap(*p.buf)]
			pool.Put(p.buf)
		}
	}()
}

// Stats returns how many packets were forwarded and dropped.
func (e *Emulator) Stats() (forwarded, dropped int64) {
	return e.forwarded.Load(), e.dropped.Load()
}

// Close stops forwarding.
func (e *Emulator) Close() {
	e.a.Close()
	e.b.Close()
	e.wg.Wait()
}
