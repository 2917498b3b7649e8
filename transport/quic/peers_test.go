package quic

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
)

// TestSuccessorResetsTheIdlePeersOfItsPredecessor: a node dies without
// a word while its client, parked, has nothing to send. The successor,
// on the same port with the same stateless reset key, resets the peers
// its predecessor listed, and the client's connection ends as reset
// without the client sending a packet.
func TestSuccessorResetsTheIdlePeersOfItsPredecessor(t *testing.T) {
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "own socket", true: "shared socket"}[shared]
		t.Run(name, func(t *testing.T) {
			cfg := authConfig()
			cfg.StatelessResetKey = &[32]byte{9}
			ts := newTestServer(t, cfg)
			ts.serve(t, echo)
			var ccfg ClientConfig
			if shared {
				tr, err := NewTransport("")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = tr.Close() })
				ccfg.Transport = tr
			}
			c := ts.dial(t, ccfg)
			p := pipeline(t, c, 1)
			if _, err := do(t, p, "token:alice"); err != nil {
				t.Fatal(err)
			}
			mustEcho(t, p, "before the crash")
			peers := ts.ln.Peers()
			for len(peers) == 0 {
				time.Sleep(10 * time.Millisecond)
				peers = ts.ln.Peers()
			}
			local := netip.MustParseAddrPort(c.LocalAddr().String()).Port()
			for _, peer := range peers {
				if peer.Addr.Port() != local {
					t.Fatalf("peer %v, want only the client, on port %d", peer.Addr, local)
				}
			}
			back, err := ParsePeers(AppendPeers(nil, peers))
			if err != nil || len(back) != len(peers) {
				t.Fatalf("peers read back: %v, %v", back, err)
			}
			for i := range back {
				if back[i] != peers[i] {
					t.Fatalf("peer %d read back as %v, want %v", i, back[i], peers[i])
				}
			}

			addr := ts.addr()
			_ = ts.ln.sock.Close() // no CONNECTION_CLOSE reaches the client
			conf := ServerTLSConfig(nil)
			conf.Certificates = []tls.Certificate{ts.eph.Server}
			successor, err := Listen(addr, conf, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer successor.Close()
			if n, err := successor.ResetPeers(back); err != nil || n != len(back) {
				t.Fatalf("ResetPeers: %d sent, %v", n, err)
			}
			select {
			case <-c.Context().Done():
			case <-testContext(t).Done():
				t.Fatal("the client's connection outlived the successor's reset")
			}
			if !IsConnectionReset(c.Err()) {
				t.Fatalf("the connection: %v, want a reset connection", c.Err())
			}
		})
	}
}

// TestResetPeersSparesOtherConnections: a reset names one connection
// ID; a client whose connection ID is another's keeps its connection.
func TestResetPeersSparesOtherConnections(t *testing.T) {
	cfg := authConfig()
	cfg.StatelessResetKey = &[32]byte{3}
	ts := newTestServer(t, cfg)
	ts.serve(t, echo)
	c := ts.dial(t, ClientConfig{})
	p := pipeline(t, c, 1)
	if _, err := do(t, p, "token:alice"); err != nil {
		t.Fatal(err)
	}
	mustEcho(t, p, "hello")
	addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), netip.MustParseAddrPort(c.LocalAddr().String()).Port())
	if _, err := ts.ln.ResetPeers([]Peer{{Addr: addr, ConnID: [serverConnIDLen]byte{1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	mustEcho(t, p, "still here")
	if err := c.Err(); err != nil {
		t.Fatalf("the connection: %v", err)
	}
}

func TestParsePeersRefusesATornList(t *testing.T) {
	b := AppendPeers(nil, []Peer{{Addr: netip.MustParseAddrPort("[::1]:7420")}})
	if _, err := ParsePeers(b[:len(b)-1]); err == nil {
		t.Fatal("a torn list was read")
	}
	if _, err := ParsePeers(bytes.Repeat([]byte{0}, 0)); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkPeerTableObserve is what noting peers adds to the node's read
// path: batches of 8 short-header datagrams from a fleet of 10,000
// connections, every connection already noted since the last snapshot
// (the steady state between two snapshots).
func BenchmarkPeerTableObserve(b *testing.B) {
	const fleet, batch = 10000, 8
	pt := newPeerTable(4*fleet, time.Now)
	batches := make([][]ipv4.Message, fleet/batch)
	for i := range fleet {
		d := make([]byte, 64)
		d[0] = 0x40
		binary.BigEndian.PutUint32(d[1:], uint32(i*2654435761))
		addr := &net.UDPAddr{IP: net.IPv4(10, 0, byte(i>>8), byte(i)), Port: 40000 + i%1000}
		k := (i * 1237) % fleet / batch // spread each batch over the fleet
		batches[k] = append(batches[k], ipv4.Message{Buffers: [][]byte{d}, N: len(d), Addr: addr})
	}
	for _, ms := range batches {
		pt.observe(ms)
	}
	datagrams := 0
	for i := 0; b.Loop(); i++ {
		ms := batches[i%len(batches)]
		pt.observe(ms)
		datagrams += len(ms)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(datagrams), "ns/datagram")
}

// TestPeerTableForgetsWhatWentQuiet: a connection ID stays listed while
// its address is a live connection's and it was seen within the idle
// timeout; an address no connection has any more, or an ID silent for
// longer, is forgotten. Handshake packets and short datagrams are not
// noted.
func TestPeerTableForgetsWhatWentQuiet(t *testing.T) {
	now := time.Unix(1000, 0)
	pt := newPeerTable(16, func() time.Time { return now })
	a := netip.MustParseAddrPort("10.0.0.1:4000")
	b := netip.MustParseAddrPort("10.0.0.2:4000")
	datagram := func(id byte, from netip.AddrPort, first byte, n int) ipv4.Message {
		d := make([]byte, n)
		d[0] = first
		d[1] = id
		return ipv4.Message{Buffers: [][]byte{d}, N: n, Addr: net.UDPAddrFromAddrPort(from)}
	}
	pt.observe([]ipv4.Message{
		datagram(1, a, 0x41, 60),
		datagram(2, b, 0x41, 60),
		datagram(3, a, 0xc0, 1200), // a handshake (long header)
		datagram(4, a, 0x41, 20),   // too short to carry a connection ID and a tag
	})
	live := map[netip.AddrPort]bool{a: true, b: true}
	ids := func(peers []Peer) []byte {
		var out []byte
		for _, p := range peers {
			out = append(out, p.ConnID[0])
		}
		return out
	}
	if got := ids(pt.snapshot(time.Minute, live)); !bytes.Equal(got, []byte{1, 2}) {
		t.Fatalf("listed %v, want connection IDs 1 and 2", got)
	}
	delete(live, b) // b's connection closed
	now = now.Add(30 * time.Second)
	pt.observe([]ipv4.Message{datagram(5, a, 0x41, 60)}) // a moved to a new connection ID
	if got := ids(pt.snapshot(time.Minute, live)); !bytes.Equal(got, []byte{1, 5}) {
		t.Fatalf("listed %v, want 1 and 5 (a's old and new IDs), not b's", got)
	}
	now = now.Add(45 * time.Second)
	pt.observe([]ipv4.Message{datagram(5, a, 0x41, 60)})
	if got := ids(pt.snapshot(time.Minute, live)); !bytes.Equal(got, []byte{5}) {
		t.Fatalf("listed %v, want only 5: 1 was silent for longer than the idle timeout", got)
	}
}

// Peers lists again only when something it shows could have changed: a
// connection ID or address noted anew, not a known client seen again
// (every packet of a busy fleet), and a connection that came or went.
func TestPeerTableChangesWithNewIDsOnly(t *testing.T) {
	now := time.Unix(1000, 0)
	pt := newPeerTable(16, func() time.Time { return now })
	a := netip.MustParseAddrPort("10.0.0.1:4000")
	datagram := func(id byte, from netip.AddrPort) ipv4.Message {
		d := make([]byte, 60)
		d[0], d[1] = 0x41, id
		return ipv4.Message{Buffers: [][]byte{d}, N: len(d), Addr: net.UDPAddrFromAddrPort(from)}
	}
	live := map[netip.AddrPort]bool{a: true}
	pt.observe([]ipv4.Message{datagram(1, a)})
	if !pt.hasChanged() {
		t.Fatal("a new connection ID is no change")
	}
	pt.snapshot(time.Minute, live)
	pt.observe([]ipv4.Message{datagram(1, a), datagram(1, a)})
	if pt.hasChanged() {
		t.Fatal("a known connection ID seen again is a change")
	}
	pt.observe([]ipv4.Message{datagram(1, netip.MustParseAddrPort("10.0.0.1:4001"))})
	if !pt.hasChanged() {
		t.Fatal("a known connection ID at a new address is no change")
	}
}
