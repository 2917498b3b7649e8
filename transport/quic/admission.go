package quic

import (
	"container/list"
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Admission: which connections the listener takes, and which it keeps.
//
// A connection is unauthenticated from its first Initial packet until its
// authentication frame is accepted (handshaking, then waiting for the
// frame), and authenticated after. The two kinds have separate bounds, so
// that connections which never authenticate cannot take the places of the
// ones that do:
//
//   - Unauthenticated connections are at most MaxUnauthenticated. One more
//     arriving evicts the oldest (closed with CodeAuthTimeout): a flood of
//     abandoned dials can only push out abandoned dials, and a client that
//     authenticates promptly is done before MaxUnauthenticated newer
//     connections have arrived.
//   - Authenticated connections are at most MaxConns (and MaxConnsPerToken
//     per token). A new connection is refused before any TLS work while
//     MaxConns are authenticated.
//   - Each source address (an IPv4 address or an IPv6 /64) has a token
//     bucket of handshakes. A connection takes a token when it arrives and
//     gives it back once it authenticates, so what the bucket limits is the
//     rate of handshakes that do not lead anywhere: a fleet behind one NAT
//     address reconnecting at once is limited only by the burst, a flood of
//     abandoned dials from one address by the rate.
//   - Under load (half of MaxUnauthenticated in use, or a source's bucket
//     below half) new connections must prove their address with a QUIC
//     Retry first, so that spoofed addresses cannot take places or drain
//     another address's bucket.
//   - A node behind with its handshakes refuses new ones (before any TLS
//     work, and without a Retry first) rather than taking on more than it
//     can finish: while every handshake it took up over the last
//     handshakeWindow had waited longer than HandshakeWaitTarget for it,
//     from its connection's arrival until the node began the TLS work on
//     its ClientHello. A crowd dialing at once (a fleet after a restart)
//     then drains at the rate the node does handshakes, the rest coming
//     back after a pause, instead of every handshake slowing down
//     together until clients give up on them and the node's work is
//     wasted. The least wait of a window is what a queue kept
//     throughout it: one slow client (a ClientHello sent in two packets
//     far apart) cannot raise it, nor a burst that drained within it.

// Reasons for refusing or closing a connection at admission.
var (
	errConnLimit   = errors.New("quic: connection limit reached")
	errTokenLimit  = errors.New("quic: connection limit of the token reached")
	errSourceRate  = errors.New("quic: too many handshakes from this address")
	errEvicted     = errors.New("quic: evicted: too many connections waiting to authenticate")
	errHandshakes  = errors.New("quic: handshakes waiting too long for the node")
	errRefusingNew = ErrServerClosed
)

// admissionLimits are the bounds of an admission, from Config.
type admissionLimits struct {
	maxAuthenticated   int
	maxUnauthenticated int
	maxPerToken        int     // 0: no bound
	sourceRate         float64 // handshakes per second per source; 0: no bound
	sourceBurst        float64
	maxSources         int
	windowBudget       uint64 // receive window growth over all connections
	// handshakeWait: past it, handshakes taken up in a whole window,
	// new connections are refused; 0: no bound.
	handshakeWait time.Duration
}

// admissionStats counts what admission refused and evicted.
type admissionStats struct {
	refusedLimit, refusedTokenLimit, refusedSourceRate, refusedShutdown uint64
	refusedHandshakes                                                   uint64
	evicted, retries                                                    uint64
	handshakeWait                                                       time.Duration // the standing wait (handshakeQueue)
	unauthenticated, authenticated                                      int
	sources                                                             int
	windowGrown, windowDenials                                          uint64
}

// admission is a listener's bookkeeping of connections. It is safe for
// concurrent use; its clock is injected.
type admission struct {
	lim admissionLimits
	now func() time.Time

	mu       sync.Mutex
	refusing bool
	pending  list.List // of *ticket, oldest first
	authed   int
	perToken map[string]int
	sources  sourceTable
	stats    admissionStats
	hs       handshakeQueue

	windowBudget, windowGrown uint64 // receive window growth: allowed, granted
	windowDenials             uint64

	// sharedPending and sharedAuthed count the places of other
	// listeners' connections among pending and authed.
	sharedPending, sharedAuthed int
}

// ticket is one connection's place in the admission.
type ticket struct {
	elem    *list.Element // in admission.pending while unauthenticated
	bucket  *bucket       // the source's bucket, holding a token of this connection
	tokenID string        // once authenticated
	authed  bool
	done    bool // released

	// evicted ends when the connection loses its place; the listener
	// closes the connection then.
	evicted context.Context
	evict   context.CancelCauseFunc

	grown uint64 // receive window growth granted beyond the initial window

	admitted time.Time // when the connection arrived
	started  bool      // the node took up its handshake (handshakeStarted)

	// shared: the place of another listener's connection (Admission), kept
	// out of this listener's counters.
	shared bool
}

func newAdmission(lim admissionLimits, now func() time.Time) *admission {
	a := &admission{lim: lim, now: now, perToken: make(map[string]int), windowBudget: lim.windowBudget}
	a.sources.init(lim.maxSources)
	return a
}

// sourceKey is the address a source's bucket is kept under: an IPv4
// address, or the /64 of an IPv6 one (one host usually has a whole /64).
func sourceKey(addr net.Addr) netip.Addr {
	var ip netip.Addr
	switch a := addr.(type) {
	case *net.UDPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	default:
		if ap, err := netip.ParseAddrPort(addr.String()); err == nil {
			ip = ap.Addr()
		}
	}
	ip = ip.Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			ip = p.Addr()
		}
	}
	return ip
}

// admit takes a place for a new connection from addr, or says why not. It
// may evict the oldest unauthenticated connection.
func (a *admission) admit(addr net.Addr) (*ticket, error) {
	return a.admitAs(addr, false)
}

// admitAs is admit; shared says the connection is another listener's,
// which counts its refusals itself, and whose source address was proven
// by its own handshake (TCP's), so it takes no token of a source's
// bucket: a flood from one address must not lock out an honest client
// behind it.
func (a *admission) admitAs(addr net.Addr, shared bool) (*ticket, error) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	stats := &a.stats
	if shared {
		stats = &admissionStats{}
	}
	switch {
	case a.refusing:
		stats.refusedShutdown++
		return nil, errRefusingNew
	case a.authed >= a.lim.maxAuthenticated:
		stats.refusedLimit++
		return nil, errConnLimit
	case !shared && a.behindLocked(now):
		stats.refusedHandshakes++
		return nil, errHandshakes
	}
	t := &ticket{shared: shared, admitted: now}
	if a.lim.sourceRate > 0 && !shared {
		b := a.sources.get(sourceKey(addr), now, a.lim.sourceBurst)
		if !b.take(now, a.lim.sourceRate, a.lim.sourceBurst) {
			stats.refusedSourceRate++
			return nil, errSourceRate
		}
		t.bucket = b
	}
	if a.pending.Len() >= a.lim.maxUnauthenticated {
		a.evictLocked(a.pending.Front().Value.(*ticket))
	}
	t.evicted, t.evict = context.WithCancelCause(context.Background())
	t.elem = a.pending.PushBack(t)
	if shared {
		a.sharedPending++
	}
	return t, nil
}

// unpendLocked takes t out of the unauthenticated connections.
func (a *admission) unpendLocked(t *ticket) {
	a.pending.Remove(t.elem)
	t.elem = nil
	if t.shared {
		a.sharedPending--
	}
}

func (a *admission) evictLocked(t *ticket) {
	a.unpendLocked(t)
	if !t.shared {
		a.stats.evicted++
	}
	t.evict(errEvicted)
}

// authenticated moves t from the unauthenticated connections to the
// authenticated ones, under tokenID. It fails when t was evicted or
// released meanwhile, or when a bound of authenticated connections is
// reached; t then holds no place.
func (a *admission) authenticated(t *ticket, tokenID string) error {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.elem == nil {
		return errEvicted
	}
	a.unpendLocked(t)
	t.evict(nil) // nothing will evict it now; frees the context
	stats := &a.stats
	if t.shared {
		stats = &admissionStats{}
	}
	switch {
	case a.authed >= a.lim.maxAuthenticated:
		stats.refusedLimit++
		return errConnLimit
	case a.lim.maxPerToken > 0 && tokenID != "" && a.perToken[tokenID] >= a.lim.maxPerToken:
		stats.refusedTokenLimit++
		return errTokenLimit
	}
	if t.bucket != nil {
		t.bucket.give(now, a.lim.sourceRate, a.lim.sourceBurst)
		t.bucket = nil
	}
	t.authed = true
	t.tokenID = tokenID
	a.authed++
	if t.shared {
		a.sharedAuthed++
	}
	if tokenID != "" {
		a.perToken[tokenID]++
	}
	return nil
}

// growWindow lets t's connection receive window grow by delta if the
// window budget covers it. Only authenticated connections grow: an
// unauthenticated one needs room for its authentication frame, no more.
func (a *admission) growWindow(t *ticket, delta uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !t.authed || t.done || a.windowGrown+delta > a.windowBudget {
		a.windowDenials++
		return false
	}
	t.grown += delta
	a.windowGrown += delta
	return true
}

// release gives back t's place and its window growth once its connection
// is gone.
func (a *admission) release(t *ticket) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.done {
		return
	}
	t.done = true
	if t.elem != nil {
		a.unpendLocked(t)
		t.evict(nil)
	}
	if t.authed {
		a.authed--
		if t.shared {
			a.sharedAuthed--
		}
		if t.tokenID != "" {
			if a.perToken[t.tokenID]--; a.perToken[t.tokenID] <= 0 {
				delete(a.perToken, t.tokenID)
			}
		}
	}
	a.windowGrown -= t.grown
	t.grown = 0
}

// demandRetry reports whether a connection from addr should prove its
// address first: under load, or when its source has used half its burst.
func (a *admission) demandRetry(addr net.Addr) bool {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.behindLocked(now) {
		// admit refuses it anyway, before any state is kept: a Retry
		// would cost the client a round trip for nothing.
		return false
	}
	retry := a.refusing || 2*a.pending.Len() >= a.lim.maxUnauthenticated
	if !retry && a.lim.sourceRate > 0 {
		if b := a.sources.peek(sourceKey(addr)); b != nil {
			retry = 2*b.level(now, a.lim.sourceRate, a.lim.sourceBurst) < a.lim.sourceBurst
		}
	}
	if retry {
		a.stats.retries++
	}
	return retry
}

// handshakeStarted notes that the node takes up t's handshake: its
// ClientHello is complete, and the TLS work begins. It returns an error
// when that work would be wasted: the connection lost its place while its
// handshake waited (evicted; it is closed as soon as its handshake is
// done), or waited so long that the handshake could not finish within
// late, its share of the handshake timeout. The listener then fails the
// handshake before its key exchange and signature.
func (a *admission) handshakeStarted(t *ticket, late time.Duration) error {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.started || t.shared {
		return nil
	}
	t.started = true
	wait := now.Sub(t.admitted)
	a.hs.observe(now, wait)
	switch {
	case t.elem == nil && !t.authed:
		return errEvicted
	case late > 0 && wait > late:
		a.stats.refusedHandshakes++
		return errHandshakes
	}
	return nil
}

// behindLocked reports whether the node's handshakes wait past the
// target: new connections are refused then.
func (a *admission) behindLocked(now time.Time) bool {
	if a.lim.handshakeWait <= 0 {
		return false
	}
	a.hs.roll(now)
	return a.hs.standing > a.lim.handshakeWait
}

// refuseNew makes every later admit fail (shutdown).
func (a *admission) refuseNew() {
	a.mu.Lock()
	a.refusing = true
	a.mu.Unlock()
}

func (a *admission) snapshot() admissionStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.stats
	s.unauthenticated = a.pending.Len() - a.sharedPending
	s.authenticated = a.authed - a.sharedAuthed
	s.sources = a.sources.len()
	s.windowGrown, s.windowDenials = a.windowGrown, a.windowDenials
	a.hs.roll(a.now())
	s.handshakeWait = a.hs.standing
	return s
}

// handshakeWindow is the window over which handshakeQueue takes the
// least wait.
const handshakeWindow = 100 * time.Millisecond

// handshakeQueue measures how long handshakes wait for the node, from
// their connection's arrival until it takes them up, as CoDel measures a
// queue: the least wait of a window is the queue that stood throughout
// it.
type handshakeQueue struct {
	start    time.Time     // of the current window
	least    time.Duration // the least wait observed in it
	n        int           // waits observed in it
	standing time.Duration // the least wait of the last window; 0 when it had none
}

func (q *handshakeQueue) observe(now time.Time, wait time.Duration) {
	q.roll(now)
	if q.n == 0 || wait < q.least {
		q.least = wait
	}
	q.n++
}

// roll ends the current window once it is over. A window in which the
// node took up no handshake says there is no queue: a node refusing
// every connection while none waits would otherwise refuse for ever.
func (q *handshakeQueue) roll(now time.Time) {
	age := now.Sub(q.start)
	if age < handshakeWindow {
		return
	}
	q.standing = 0
	if q.n > 0 && age < 2*handshakeWindow {
		q.standing = q.least
	}
	q.start, q.least, q.n = now, 0, 0
}

// bucket is a token bucket of handshakes.
type bucket struct {
	key    netip.Addr
	tokens float64
	at     time.Time // when tokens was last brought up to date
	elem   *list.Element
}

func (b *bucket) level(now time.Time, rate, burst float64) float64 {
	if d := now.Sub(b.at); d > 0 {
		return min(burst, b.tokens+d.Seconds()*rate)
	}
	return b.tokens
}

func (b *bucket) take(now time.Time, rate, burst float64) bool {
	b.tokens, b.at = b.level(now, rate, burst), now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func (b *bucket) give(now time.Time, rate, burst float64) {
	b.tokens, b.at = min(burst, b.level(now, rate, burst)+1), now
}

// sourceTable holds the buckets of the most recently seen sources, at most
// max of them. A source pushed out starts again with a full bucket, as a
// source seen for the first time does, so the table's bound costs nothing
// but precision against an attacker with more addresses than it holds.
type sourceTable struct {
	max   int
	byKey map[netip.Addr]*bucket
	lru   list.List // of *bucket, least recently used first
}

func (s *sourceTable) init(max int) {
	s.max = max
	s.byKey = make(map[netip.Addr]*bucket)
}

func (s *sourceTable) len() int { return len(s.byKey) }

func (s *sourceTable) peek(key netip.Addr) *bucket { return s.byKey[key] }

// get returns key's bucket, making a full one if it has none.
func (s *sourceTable) get(key netip.Addr, now time.Time, burst float64) *bucket {
	if b := s.byKey[key]; b != nil {
		s.lru.MoveToBack(b.elem)
		return b
	}
	if len(s.byKey) >= s.max {
		oldest := s.lru.Front().Value.(*bucket)
		s.lru.Remove(oldest.elem)
		delete(s.byKey, oldest.key)
	}
	b := &bucket{key: key, tokens: burst, at: now}
	b.elem = s.lru.PushBack(b)
	s.byKey[key] = b
	return b
}
