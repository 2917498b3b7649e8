package quic

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stampOOB is the control message the kernel attaches to a datagram
// with its arrival time, in nanoseconds since 1970.
func stampOOB(ns int64) []byte {
	ts := binary.NativeEndian.AppendUint64(nil, uint64(ns/1e9))
	return controlMessage(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, binary.NativeEndian.AppendUint64(ts, uint64(ns%1e9)))
}

// The arrival stamp is taken out of a datagram's control messages,
// wherever it is among them, and the others are left as they were for
// quic-go to read.
func TestCutRxTimestampLeavesTheOtherMessages(t *testing.T) {
	const ns = 1_764_000_000_123_456_789
	for _, tc := range []struct {
		name string
		oob  []byte
	}{
		{"first", concat(stampOOB(ns), groOOB(1200))},
		{"last", concat(groOOB(1200), stampOOB(ns))},
	} {
		rest, stamp := cutRxTimestamp(tc.oob)
		if stamp != ns {
			t.Errorf("%s: stamp %d, want %d", tc.name, stamp, int64(ns))
		}
		if !bytes.Equal(rest, groOOB(1200)) || groSegmentSize(rest) != 1200 {
			t.Errorf("%s: left %x, want the GRO message alone", tc.name, rest)
		}
	}
	plain := groOOB(900)
	if rest, stamp := cutRxTimestamp(plain); stamp != 0 || !bytes.Equal(rest, groOOB(900)) {
		t.Errorf("without a stamp: %x, %d; want the messages unchanged", rest, stamp)
	}
}

// Once a listener asks for the socket's wait, the kernel stamps each
// datagram: a queue that the reader has not come back to reads as a
// wait, a read measures the wait of the datagram at its head, and the
// datagrams handed on carry no stamp.
func TestSocketQueueWaitMeasured(t *testing.T) {
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	sock := newYieldingConn(rx)
	defer sock.Close()
	if sock.gro == nil {
		t.Skip("the socket is not read through groReader (no UDP_GRO): no wait is measured")
	}
	if d := sock.queueDelay(); d != 0 || !sock.stamps.on {
		t.Fatalf("an empty socket: wait %v, stamps on %v; want 0, on", d, sock.stamps.on)
	}
	tx, err := net.DialUDP("udp4", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	for range 3 {
		if _, err := tx.Write([]byte("datagram")); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(safety)
	for !socketHolds(rx) {
		if time.Now().After(deadline) {
			t.Fatal("the datagrams never reached the socket")
		}
		time.Sleep(time.Millisecond) // polling, not synchronizing
	}
	if d := sock.queueDelay(); d <= 0 {
		t.Errorf("datagrams waiting and none read: wait %v, want how long the reader has been away", d)
	}
	var got int
	for got < 3 {
		ms := quicBatch(8)
		n, err := sock.ReadBatch(ms, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms[:n] {
			if string(m.Buffers[0][:m.N]) != "datagram" {
				t.Fatalf("read %q", m.Buffers[0][:m.N])
			}
			if _, stamp := cutRxTimestamp(m.OOB[:m.NN]); stamp != 0 {
				t.Error("a datagram was handed on with its arrival stamp")
			}
			got++
		}
	}
	if w := sock.gro.rx.Load().minWait.Load(); w == noWait || w < 0 {
		t.Fatalf("after a read: head wait %d, want the stamped datagram's wait", w)
	}
	if d := sock.queueDelay(); d < 0 {
		t.Errorf("wait %v", d)
	}
	if d := sock.queueDelay(); d != 0 {
		t.Errorf("nothing read nor waiting since: wait %v, want 0", d)
	}
}

// A listener whose socket's wait is measured serves as before: quic-go
// reads the control messages it knows, without the stamps.
func TestListenerServesWithArrivalStamps(t *testing.T) {
	ts := newTestServer(t, Config{})
	_ = ts.ln.ReceiveQueueDelay()
	ts.serve(t, echo)
	c := ts.dial(t, ClientConfig{})
	p := pipeline(t, c, 1)
	for i := range 20 {
		if got, err := do(t, p, "ping"); err != nil || got != "echo:ping" {
			t.Fatalf("echo %d = %q, %v", i, got, err)
		}
	}
	if ts.ln.sock.gro != nil && !ts.ln.sock.stamps.on {
		t.Error("the listener's socket does not stamp its datagrams")
	}
}
