package wan

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTCPCongestionControlSetsTheSocketsAlgorithm: a connection dialed
// with the control runs the congestion control asked for, whatever the
// system's default; an unknown one fails the dial with its name.
func TestTCPCongestionControlSetsTheSocketsAlgorithm(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, cc := range []string{"cubic", "reno"} {
		c, err := (&net.Dialer{Control: TCPCongestionControl(cc)}).Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Skipf("%s: %v (not available here)", cc, err)
		}
		raw, _ := c.(*net.TCPConn).SyscallConn()
		var got string
		var gerr error
		_ = raw.Control(func(fd uintptr) { got, gerr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION) })
		c.Close()
		if gerr != nil || got != cc {
			t.Fatalf("dialed with %s, the socket runs %q (%v)", cc, got, gerr)
		}
	}
	_, err = (&net.Dialer{Control: TCPCongestionControl("no-such-cc")}).Dial("tcp", ln.Addr().String())
	if err == nil {
		t.Fatal("an unknown congestion control dialed without an error")
	}
	if TCPCongestionControl("") != nil {
		t.Fatal("an empty name should keep the system's congestion control (no control function)")
	}
}
