package plugins

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// callState is what host functions know about the guest call in progress.
// Every entry into a guest (start-up, init, filter, propose) carries one in
// its context; host functions find it with stateOf.
type callState struct {
	inst     *instance
	ctx      context.Context // the caller's context: its cancellation aborts the call
	now      func() time.Time
	deadline time.Time
	// callerFirst: the caller's own deadline (ctx's) comes before the
	// call's, so a call found past both was abandoned by its caller; else
	// the call's deadline passed first, and such a call timed out.
	callerFirst bool
	start       time.Time // host time at the start of the call (the guest's wall clock base)
	monoAt      int64     // the instance's virtual monotonic clock at the start
	view        *View     // the records of a filter or propose call; nil otherwise
	guestErr    string    // set by the host's error function
	work        int64     // host-function work since the last deadline check
	logBytes    int       // bytes logged during this call
	yields      int
	closing     <-chan struct{} // closed when the host closes
}

type callStateKey struct{}

// Aborts raised (as panics) from host functions; wazero returns them,
// wrapped, as the call's error.
var (
	errAbortTimeout  = errors.New("deadline exceeded")
	errAbortCanceled = errors.New("caller canceled the call")
	errAbortClosed   = errors.New("host closing")
)

// hostWorkCheck is how much host-function work (bytes scanned, copied or
// written) runs between two deadline checks.
const hostWorkCheck = 1 << 20

func stateOf(ctx context.Context) *callState {
	cs, _ := ctx.Value(callStateKey{}).(*callState)
	if cs == nil {
		// Host functions are only reachable through guest calls the host
		// makes, which always carry a state.
		panic(errors.New("plugins: host function called outside a plugin call"))
	}
	return cs
}

// checkDeadline aborts the call when the caller gave up or the deadline
// passed. It unwinds the guest with a panic, which wazero turns into the
// call's error. A check can come late (a loaded machine did not run the
// guest's thread for a while) and find both deadlines past: the one that
// passed first is the reason, so that a plugin past its own deadline is
// judged for it, and one whose caller gave up earlier is not.
func (cs *callState) checkDeadline() {
	cs.work = 0
	select {
	case <-cs.closing:
		panic(errAbortClosed)
	default:
	}
	past := !cs.now().Before(cs.deadline)
	if err := cs.ctx.Err(); err != nil && !(past && !cs.callerFirst && errors.Is(err, context.DeadlineExceeded)) {
		panic(fmt.Errorf("%w: %w", errAbortCanceled, err))
	}
	if past {
		panic(errAbortTimeout)
	}
}

// charge accounts n units of host-function work, checking the deadline
// every hostWorkCheck units.
func (cs *callState) charge(n int) {
	cs.work += int64(n)
	if cs.work >= hostWorkCheck {
		cs.checkDeadline()
	}
}

// yield is the metering import (meter.go): the guest's fuel ran out.
func yield(ctx context.Context, _ api.Module, stack []uint64) {
	cs := stateOf(ctx)
	cs.yields++
	cs.checkDeadline()
	stack[0] = meterSlice
}

// read returns guest memory [ptr, ptr+n) or aborts the call with a trap
// naming the function: a guest passing a span outside its memory is
// broken.
func read(mod api.Module, fn string, ptr, n uint32) []byte {
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		panic(fmt.Errorf("%w: %s: span [%d, %d) is outside the plugin's memory of %d bytes",
			errGuestFault, fn, ptr, uint64(ptr)+uint64(n), mod.Memory().Size()))
	}
	return b
}

// errGuestFault marks a host function refusing the guest's arguments; the
// call fails as a trap.
var errGuestFault = errors.New("bad host function arguments")
