package quic

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// groOOB is the control message the kernel attaches to a coalesced run
// of datagrams of seg bytes each.
func groOOB(seg int) []byte {
	return controlMessage(unix.IPPROTO_UDP, unix.UDP_GRO, binary.NativeEndian.AppendUint32(nil, uint32(seg)))
}

// controlMessage is one control message of level and typ carrying data,
// as the kernel lays it out.
func controlMessage(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

// fakeBatches hands out prepared messages, one batch per call.
type fakeBatches struct {
	batches [][]ipv4.Message
	calls   int
}

func (f *fakeBatches) ReadBatch(ms []ipv4.Message, _ int) (int, error) {
	if f.calls >= len(f.batches) {
		return 0, errors.New("no more batches")
	}
	b := f.batches[f.calls]
	f.calls++
	for i, m := range b {
		ms[i].N = copy(ms[i].Buffers[0], m.Buffers[0])
		ms[i].NN = copy(ms[i].OOB, m.OOB)
		ms[i].Addr = m.Addr
	}
	return len(b), nil
}

// quicBatch is a batch of messages as quic-go hands them to ReadBatch.
func quicBatch(n int) []ipv4.Message {
	ms := make([]ipv4.Message, n)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, 1452)}
		ms[i].OOB = make([]byte, 128)
	}
	return ms
}

// A coalesced run of datagrams is handed to quic-go as the datagrams that
// were sent, in order, each with its sender and control messages, across
// as many of quic-go's batches as it takes; a datagram read alone is
// handed over as it is.
func TestGROReaderSplitsCoalescedDatagrams(t *testing.T) {
	from := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}
	other := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4343}
	var sent [][]byte
	datagram := func(n int) []byte {
		d := bytes.Repeat([]byte{byte(len(sent) + 1)}, n)
		sent = append(sent, d)
		return d
	}
	run := concat(datagram(1200), datagram(1200), datagram(1200), datagram(500))
	alone := datagram(300)
	second := concat(datagram(1000), datagram(1000))
	src := &fakeBatches{batches: [][]ipv4.Message{
		{{Buffers: [][]byte{run}, OOB: groOOB(1200), Addr: from}, {Buffers: [][]byte{alone}, Addr: other}},
		{{Buffers: [][]byte{second}, OOB: groOOB(1000), Addr: from}},
	}}
	g := &groReader{}
	var got [][]byte
	var addrs []net.Addr
	for len(got) < len(sent) {
		ms := quicBatch(2)
		n, err := g.read(src, ms, 0)
		if err != nil {
			t.Fatalf("after %d datagrams: %v", len(got), err)
		}
		for _, m := range ms[:n] {
			got = append(got, m.Buffers[0][:m.N])
			addrs = append(addrs, m.Addr)
			if m.Addr == from && groSegmentSize(m.OOB[:m.NN]) == 0 {
				t.Error("a datagram of a coalesced run lost its control messages")
			}
		}
	}
	for i := range sent {
		if !bytes.Equal(got[i], sent[i]) {
			t.Fatalf("datagram %d: got %d bytes of %d, want %d of %d", i, len(got[i]), got[i][0], len(sent[i]), sent[i][0])
		}
	}
	if addrs[4] != other || addrs[0] != from || addrs[6] != from {
		t.Errorf("senders %v, want each datagram's own", addrs)
	}
	if src.calls != 2 {
		t.Errorf("%d system calls for two batches of messages", src.calls)
	}
	if n := g.coalesced.Load(); n != 2 {
		t.Errorf("%d coalesced messages counted, want 2", n)
	}
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// On loopback, a burst sent as one segmented write (UDP_SEGMENT, as
// quic-go sends) reaches a socket with UDP_GRO as one message, and the
// yielding socket hands it over as the datagrams sent.
func TestLoopbackBurstReadAsOneMessage(t *testing.T) {
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	sock := newYieldingConn(rx)
	defer sock.Close()
	if sock.gro == nil {
		t.Skip("the kernel does not coalesce datagrams (no UDP_GRO)")
	}
	tx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	const seg, count = 1000, 10
	var burst []byte
	for i := range count {
		burst = append(burst, bytes.Repeat([]byte{byte(i + 1)}, seg)...)
	}
	oob := make([]byte, unix.CmsgSpace(2))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&oob[unix.CmsgLen(0)])) = seg
	if _, _, err := tx.WriteMsgUDP(burst, oob, rx.LocalAddr().(*net.UDPAddr)); err != nil {
		t.Skipf("the kernel does not send segmented bursts (UDP_SEGMENT): %v", err)
	}
	var got int
	for got < count {
		ms := quicBatch(4)
		n, err := sock.ReadBatch(ms, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms[:n] {
			if m.N != seg || m.Buffers[0][0] != byte(got+1) || m.Buffers[0][seg-1] != byte(got+1) {
				t.Fatalf("datagram %d: %d bytes starting with %d", got, m.N, m.Buffers[0][0])
			}
			got++
		}
	}
	if n := sock.gro.coalesced.Load(); n != 1 {
		t.Errorf("the burst was read as %d coalesced messages, want 1", n)
	}
}

// A large request and its reply cross loopback as segmented bursts that
// both ends read coalesced, and arrive whole.
func TestQUICBurstsReadCoalesced(t *testing.T) {
	ts := newTestServer(t, Config{})
	ts.serve(t, echo)
	c := ts.dial(t, ClientConfig{})
	if c.sock.gro == nil || ts.ln.sock.gro == nil {
		t.Skip("the kernel does not coalesce datagrams (no UDP_GRO)")
	}
	p := pipeline(t, c, 1)
	body := string(bytes.Repeat([]byte("0123456789abcdef"), 256<<10)) // 4 MiB
	got, err := do(t, p, body)
	if err != nil || got != "echo:"+body {
		t.Fatalf("echo of 4 MiB: %d bytes, %v", len(got), err)
	}
	if ts.ln.sock.gro.coalesced.Load() == 0 {
		t.Error("the node read no coalesced burst")
	}
	if c.sock.gro.coalesced.Load() == 0 {
		t.Error("the client read no coalesced burst")
	}
}

// A socket whose receive buffer is below what quic-go wants is reported
// at start as a warning, with the size the kernel granted.
func TestUdpBuffersLoggedBelowWanted(t *testing.T) {
	sock, err := listenUDP(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	if err := sock.SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	rcv, _, ok := socketBuffers(sock.UDPConn)
	if !ok || rcv < 64<<10 {
		t.Fatalf("socketBuffers = %d, %v; want at least the 64 KiB set", rcv, ok)
	}
	var out bytes.Buffer
	sock.logBuffers(slog.New(slog.NewTextHandler(&out, nil)))
	line := out.String()
	for _, want := range []string{"level=WARN", "udp socket buffers", fmt.Sprintf("receive=%d", rcv), "net.core.rmem_max"} {
		if !strings.Contains(line, want) {
			t.Errorf("log %q lacks %q", line, want)
		}
	}
}
