package plugins

import (
	"context"
	"log/slog"
	"strings"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// The restricted WASI (wasi_snapshot_preview1). Standard toolchains'
// guests import a handful of these functions to start; the host links the
// whole set so that any of them loads, and implements only what a sandbox
// needs:
//
//   - no arguments, no environment;
//   - fd 0 reads as empty, fds 1 and 2 write to the plugin's log, every
//     other descriptor is EBADF: no file system (no preopened directories,
//     so every path_* call fails) and no sockets;
//   - a virtual clock: the monotonic clocks advance 1µs per reading and by
//     whatever a guest sleeps, without waiting; the wall clock reads the
//     host time at the start of the call plus the monotonic advance within
//     it;
//   - randomness from a per-instance generator seeded from the host seed;
//   - proc_exit ends the call (as a trap unless the instance is starting
//     and the code is 0).

// WASI errno values used here.
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoFault   = 21
	errnoInval   = 28
	errnoNosys   = 52
	errnoSpipe   = 70
)

// clockTick is how far the virtual monotonic clock advances per reading.
const clockTick = 1000 // ns

func wasiFuncs() map[string]api.GoModuleFunc {
	fns := map[string]api.GoModuleFunc{
		"args_get":          wasiZero,
		"args_sizes_get":    wasiSizes,
		"environ_get":       wasiZero,
		"environ_sizes_get": wasiSizes,
		"clock_res_get":     wasiClockRes,
		"clock_time_get":    wasiClockTime,
		"fd_write":          wasiFdWrite,
		"fd_read":           wasiFdRead,
		"fd_fdstat_get":     wasiFdstat,
		"fd_close":          wasiFdClose,
		"fd_seek":           wasiNoSeek,
		"fd_tell":           wasiNoSeek,
		"poll_oneoff":       wasiPoll,
		"proc_exit":         wasiExit,
		"sched_yield":       wasiZero,
		"random_get":        wasiRandom,
	}
	for name := range wasiFuncTypes {
		if _, ok := fns[name]; ok {
			continue
		}
		errno := uint64(errnoNosys)
		if strings.HasPrefix(name, "fd_") || strings.HasPrefix(name, "path_") || strings.HasPrefix(name, "sock_") {
			errno = errnoBadf
		}
		fns[name] = func(_ context.Context, _ api.Module, stack []uint64) { stack[0] = errno }
	}
	return fns
}

func wasiZero(_ context.Context, _ api.Module, stack []uint64) { stack[0] = errnoSuccess }

// wasiSizes answers args_sizes_get and environ_sizes_get: zero entries.
func wasiSizes(_ context.Context, mod api.Module, stack []uint64) {
	mem := mod.Memory()
	if !mem.WriteUint32Le(uint32(stack[0]), 0) || !mem.WriteUint32Le(uint32(stack[1]), 0) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

func wasiClockRes(_ context.Context, mod api.Module, stack []uint64) {
	if uint32(stack[0]) > 3 {
		stack[0] = errnoInval
		return
	}
	if !mod.Memory().WriteUint64Le(uint32(stack[1]), clockTick) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

// readClock advances the virtual clock by one tick and returns the reading
// of clock id (0 wall, 1 monotonic, 2 process, 3 thread), in ns.
func (cs *callState) readClock(id uint32) int64 {
	cs.inst.mono += clockTick
	return cs.clockNow(id)
}

// clockNow is the reading of clock id without advancing it.
func (cs *callState) clockNow(id uint32) int64 {
	if id == 0 {
		return cs.start.UnixNano() + cs.inst.mono - cs.monoAt
	}
	return cs.inst.mono
}

func wasiClockTime(ctx context.Context, mod api.Module, stack []uint64) {
	id := uint32(stack[0])
	if id > 3 {
		stack[0] = errnoInval
		return
	}
	t := stateOf(ctx).readClock(id)
	if !mod.Memory().WriteUint64Le(uint32(stack[2]), uint64(t)) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

// iovecs calls f with each buffer of the iovec array at ptr, n entries.
func iovecs(mod api.Module, fn string, ptr, n uint32, f func([]byte)) {
	vec := read(mod, fn, ptr, n*8)
	for i := uint32(0); i < n; i++ {
		f(read(mod, fn, le32(vec[i*8:]), le32(vec[i*8+4:])))
	}
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func wasiFdWrite(ctx context.Context, mod api.Module, stack []uint64) {
	fd, iovs, n, resPtr := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	if fd != 1 && fd != 2 {
		stack[0] = errnoBadf
		return
	}
	cs := stateOf(ctx)
	stream := "stdout"
	if fd == 2 {
		stream = "stderr"
	}
	total := uint32(0)
	iovecs(mod, "wasi.fd_write", iovs, n, func(b []byte) {
		cs.charge(len(b))
		cs.inst.log.write(cs, stream, b)
		total += uint32(len(b))
	})
	if !mod.Memory().WriteUint32Le(resPtr, total) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

// wasiFdRead reads stdin as empty; other descriptors do not exist.
func wasiFdRead(_ context.Context, mod api.Module, stack []uint64) {
	if uint32(stack[0]) != 0 {
		stack[0] = errnoBadf
		return
	}
	if !mod.Memory().WriteUint32Le(uint32(stack[3]), 0) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

// wasiFdstat describes fds 0-2 as character devices.
func wasiFdstat(_ context.Context, mod api.Module, stack []uint64) {
	fd, ptr := uint32(stack[0]), uint32(stack[1])
	if fd > 2 {
		stack[0] = errnoBadf
		return
	}
	const rightRead, rightWrite = 1 << 1, 1 << 6
	var st [24]byte
	st[0] = 2 // character device
	rights := uint64(rightWrite)
	if fd == 0 {
		rights = rightRead
	}
	for i := 0; i < 8; i++ {
		st[8+i] = byte(rights >> (8 * i))
	}
	if !mod.Memory().Write(ptr, st[:]) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

func wasiFdClose(_ context.Context, _ api.Module, stack []uint64) {
	if uint32(stack[0]) > 2 {
		stack[0] = errnoBadf
		return
	}
	stack[0] = errnoSuccess
}

func wasiNoSeek(_ context.Context, _ api.Module, stack []uint64) {
	if uint32(stack[0]) > 2 {
		stack[0] = errnoBadf
		return
	}
	stack[0] = errnoSpipe
}

// wasiPoll never waits. Descriptor subscriptions are ready at once (EBADF
// for descriptors that do not exist); when there are none, the virtual
// clock jumps to the earliest clock subscription's deadline, which fires.
func wasiPoll(ctx context.Context, mod api.Module, stack []uint64) {
	in, out, n, resPtr := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	if n == 0 {
		stack[0] = errnoInval
		return
	}
	cs := stateOf(ctx)
	subs := read(mod, "wasi.poll_oneoff", in, n*48)
	events := read(mod, "wasi.poll_oneoff", out, n*32)
	cs.charge(len(subs))
	le64 := func(b []byte) uint64 { return uint64(le32(b)) | uint64(le32(b[4:]))<<32 }
	put := func(ev []byte, userdata uint64, errno uint16, typ byte) {
		clear(ev[:32])
		for i := 0; i < 8; i++ {
			ev[i] = byte(userdata >> (8 * i))
		}
		ev[8], ev[9], ev[10] = byte(errno), byte(errno>>8), typ
	}
	var nev uint32
	for i := uint32(0); i < n; i++ {
		s := subs[i*48:]
		if typ := s[8]; typ == 1 || typ == 2 {
			errno := uint16(errnoSuccess)
			if fd := le32(s[16:]); (typ == 1 && fd != 0) || (typ == 2 && fd != 1 && fd != 2) {
				errno = errnoBadf
			}
			put(events[nev*32:], le64(s), errno, typ)
			nev++
		}
	}
	if nev == 0 {
		// Only clocks: jump to the earliest deadline and fire what is due.
		due := func(s []byte) int64 {
			d := int64(le64(s[24:]))
			if s[40]&1 != 0 { // absolute time
				d -= cs.clockNow(le32(s[16:]))
			}
			return max(d, 0)
		}
		earliest := int64(-1)
		for i := uint32(0); i < n; i++ {
			if s := subs[i*48:]; s[8] == 0 {
				if d := due(s); earliest < 0 || d < earliest {
					earliest = d
				}
			}
		}
		if earliest < 0 {
			stack[0] = errnoInval // no subscription of a known type
			return
		}
		cs.inst.mono += earliest
		for i := uint32(0); i < n; i++ {
			if s := subs[i*48:]; s[8] == 0 && due(s) == 0 {
				put(events[nev*32:], le64(s), errnoSuccess, 0)
				nev++
			}
		}
	}
	if !mod.Memory().WriteUint32Le(resPtr, nev) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

func wasiExit(ctx context.Context, _ api.Module, stack []uint64) {
	cs := stateOf(ctx)
	code := uint32(stack[0])
	cs.inst.log.message(cs, slog.LevelDebug, "exit", []byte("proc_exit called"))
	panic(sys.NewExitError(code))
}

func wasiRandom(ctx context.Context, mod api.Module, stack []uint64) {
	cs := stateOf(ctx)
	b := read(mod, "wasi.random_get", uint32(stack[0]), uint32(stack[1]))
	cs.charge(len(b))
	cs.inst.rng.Read(b)
	stack[0] = errnoSuccess
}
