package quic

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.org/x/net/ipv4"
)

// Peer is a client connection as its node's successor may have to end
// it: the client's UDP address and the connection ID the client last
// sent its packets to.
//
// A client whose node died without a word (SIGKILL, a power cut) learns
// it only when one of its packets reaches the node's successor, which
// answers a packet of a connection it does not know with a stateless
// reset. A client parked in a long poll sends nothing but keep-alives,
// of 42 bytes or fewer, which quic-go never answers: it would wait out
// its poll. A successor that knows its predecessor's peers sends each a
// stateless reset unasked ([Listener.ResetPeers]), and the client
// reconnects at once. quic-go's client honours the reset token of the
// connection ID it currently sends to, and no other, so that is the ID a
// Peer names.
type Peer struct {
	Addr   netip.AddrPort
	ConnID [serverConnIDLen]byte
}

// peerTable remembers, from the datagrams the node's socket reads, the
// address each connection ID was last seen from. The socket's reader
// updates it once per batch, under one lock; a snapshot takes the same
// lock once a second or so. A datagram of a connection already noted
// since the last snapshot costs one map lookup (BenchmarkPeerTableObserve),
// next to quic-go's decryption of it.
type peerTable struct {
	mu    sync.Mutex
	seen  map[[serverConnIDLen]byte]peerSeen
	limit int // connection IDs held at most: a flood of made-up IDs is not remembered
	now   func() time.Time
	epoch int64 // unix nanoseconds of the last snapshot: when "seen" starts counting
	// changed: a connection ID or an address was noted anew since the
	// last snapshot (seeing a known one again is not a change).
	changed bool
}

type peerSeen struct {
	addr  netip.AddrPort
	epoch int64 // the snapshot epoch in which it was last seen
}

func newPeerTable(limit int, now func() time.Time) *peerTable {
	return &peerTable{seen: make(map[[serverConnIDLen]byte]peerSeen), limit: limit, now: now, epoch: now().UnixNano()}
}

// observe records the destination connection ID and source of each
// short-header packet of a batch read from the socket. Long-header
// packets (handshakes) carry IDs a client has not settled on yet.
func (t *peerTable) observe(ms []ipv4.Message) {
	t.mu.Lock()
	for i := range ms {
		m := &ms[i]
		if m.N < 1+serverConnIDLen+16 || len(m.Buffers) == 0 {
			continue
		}
		b := m.Buffers[0][:m.N]
		if b[0]&0xc0 != 0x40 { // not a short-header QUIC packet
			continue
		}
		ua, ok := m.Addr.(*net.UDPAddr)
		if !ok {
			continue
		}
		id := [serverConnIDLen]byte(b[1 : 1+serverConnIDLen])
		addr := unmapped(ua.AddrPort())
		s, known := t.seen[id]
		if known && s.epoch == t.epoch && s.addr == addr {
			continue // noted since the last snapshot
		}
		if !known && len(t.seen) >= t.limit {
			continue
		}
		t.changed = t.changed || !known || s.addr != addr
		t.seen[id] = peerSeen{addr: addr, epoch: t.epoch}
	}
	t.mu.Unlock()
}

// snapshot returns the connection IDs seen within maxAge (give or take
// the time between two snapshots) from an address that live reports as
// a connected peer's, sorted, and forgets the rest.
func (t *peerTable) snapshot(maxAge time.Duration, live map[netip.AddrPort]bool) []Peer {
	now := t.now().UnixNano()
	oldest := now - maxAge.Nanoseconds()
	t.mu.Lock()
	t.epoch, t.changed = now, false
	peers := make([]Peer, 0, len(t.seen))
	for id, s := range t.seen {
		if s.epoch < oldest || !live[s.addr] {
			delete(t.seen, id)
			continue
		}
		peers = append(peers, Peer{Addr: s.addr, ConnID: id})
	}
	t.mu.Unlock()
	slices.SortFunc(peers, func(a, b Peer) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		return bytes.Compare(a.ConnID[:], b.ConnID[:])
	})
	return peers
}

// hasChanged reports whether a connection ID or address was noted anew
// since the last snapshot.
func (t *peerTable) hasChanged() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// Peers returns the connections of the listener's authenticated or
// authenticating clients as a successor would reset them: each client
// address with the connection IDs its packets were sent to within the
// idle timeout (a connection has one, or briefly two while it moves to
// the next). A connection is in it once a packet of its own past the
// handshake has been read. The node saves it in its data directory, a
// second or so at a time, for its successor after a crash. Without a
// [Config.StatelessResetKey] it is nil: a successor could not reset them.
//
// The list is shared with other callers and must not be modified. While
// no connection came or went and no client was seen at a new connection
// ID or address, the last list is returned again, for at most
// peersRefresh: listing 5,000 connections every second (their addresses,
// a map of the live ones, a sort) had cost a node 19 ms of CPU a second,
// 3% of its CPU at a record a second per device.
func (l *Listener) Peers() []Peer {
	t := l.sock.peers
	if t == nil {
		return nil
	}
	l.peersMu.Lock()
	defer l.peersMu.Unlock()
	gen, now := l.connsGen.Load(), t.now()
	if l.peersListed && gen == l.peersGen && !t.hasChanged() && now.Sub(l.peersAt) < peersRefresh {
		return l.peers
	}
	l.mu.Lock()
	live := make(map[netip.AddrPort]bool, len(l.conns))
	for c := range l.conns {
		if ua, ok := c.qc.RemoteAddr().(*net.UDPAddr); ok {
			live[unmapped(ua.AddrPort())] = true
		}
	}
	l.mu.Unlock()
	l.peers = t.snapshot(l.cfg.MaxIdleTimeout, live)
	l.peersListed, l.peersGen, l.peersAt = true, gen, now
	return l.peers
}

// peersRefresh bounds how long Peers lists the same peers without looking
// again: what only ages (a connection ID a client stopped using) leaves
// the list within it.
const peersRefresh = 10 * time.Second

func unmapped(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// statelessResetLen is the length of the resets a listener sends: as
// long as those quic-go sends in answer to a packet.
const statelessResetLen = 42

// ResetPeers sends each peer a stateless reset, as if it had just
// received a packet of the peer's connection: a node calls it when it
// starts after an unclean stop, with its predecessor's [Listener.Peers],
// so that clients that have nothing to send (a parked poll) reconnect at
// once rather than at their next request. The token is derived from the
// connection ID under [Config.StatelessResetKey], which must be the
// predecessor's. A peer whose connection has moved on to another
// connection ID ignores the reset. It returns how many resets were sent,
// and an error that counts those that could not be, with the first
// cause.
func (l *Listener) ResetPeers(peers []Peer) (int, error) {
	if l.cfg.StatelessResetKey == nil {
		return 0, errors.New("quic: ResetPeers needs a StatelessResetKey")
	}
	mac := hmac.New(sha256.New, l.cfg.StatelessResetKey[:])
	pkt := make([]byte, statelessResetLen)
	sent, failed := 0, 0
	var firstErr error
	for _, p := range peers {
		if !p.Addr.IsValid() {
			continue
		}
		// quic-go's token: HMAC-SHA256 of the connection ID under the key,
		// its first 16 bytes (stateless_reset.go).
		mac.Reset()
		mac.Write(p.ConnID[:])
		token := mac.Sum(nil)[:16]
		_, _ = rand.Read(pkt[:statelessResetLen-16])
		pkt[0] = pkt[0]&0x3f | 0x40 // a short header with the QUIC bit set
		copy(pkt[statelessResetLen-16:], token)
		if _, err := l.tr.WriteTo(pkt, net.UDPAddrFromAddrPort(p.Addr)); err != nil {
			if failed++; firstErr == nil {
				firstErr = err
			}
			continue
		}
		sent++
	}
	if firstErr != nil {
		return sent, fmt.Errorf("quic: %d stateless resets not sent, the first: %w", failed, firstErr)
	}
	return sent, nil
}

// AppendPeers appends peers to b in the form [ParsePeers] reads: per
// peer, the address's 16 bytes (IPv4 mapped into IPv6), its port (2 bytes,
// big-endian) and the connection ID.
func AppendPeers(b []byte, peers []Peer) []byte {
	for _, p := range peers {
		a := p.Addr.Addr().As16()
		b = append(b, a[:]...)
		b = append(b, byte(p.Addr.Port()>>8), byte(p.Addr.Port()))
		b = append(b, p.ConnID[:]...)
	}
	return b
}

// peerRecordLen is the length of one peer in AppendPeers' form.
const peerRecordLen = 16 + 2 + serverConnIDLen

// ParsePeers reads what [AppendPeers] wrote.
func ParsePeers(b []byte) ([]Peer, error) {
	if len(b)%peerRecordLen != 0 {
		return nil, errors.New("quic: peer list of a length that is not a whole number of peers")
	}
	peers := make([]Peer, 0, len(b)/peerRecordLen)
	for ; len(b) > 0; b = b[peerRecordLen:] {
		addr := netip.AddrFrom16([16]byte(b[:16])).Unmap()
		port := uint16(b[16])<<8 | uint16(b[17])
		peers = append(peers, Peer{
			Addr:   netip.AddrPortFrom(addr, port),
			ConnID: [serverConnIDLen]byte(b[18:peerRecordLen]),
		})
	}
	return peers, nil
}
