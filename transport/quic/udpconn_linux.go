package quic

import (
	"encoding/binary"
	"net"

	"golang.org/x/sys/unix"
)

// enableGRO asks the kernel to deliver runs of datagrams of one flow as
// one buffer (UDP_GRO, Linux 5.0 and later), and says whether it will.
func enableGRO(c *net.UDPConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1)
	}); err != nil {
		return false
	}
	return serr == nil
}

// groSegmentSize is the length of the datagrams a coalesced message holds
// (the last may be shorter), from its control messages; 0 if the message
// is one datagram.
func groSegmentSize(oob []byte) int {
	for len(oob) > 0 {
		h, body, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return 0
		}
		if h.Level == unix.IPPROTO_UDP && h.Type == unix.UDP_GRO && len(body) >= 4 {
			return int(binary.NativeEndian.Uint32(body)) // an int in the kernel
		}
		oob = rest
	}
	return 0
}

// socketBuffers reads the socket's receive and send buffer sizes as the
// kernel reports them (twice what was set, the kernel's bookkeeping
// included: the figure quic-go compares with what it wants).
func socketBuffers(c *net.UDPConn) (rcv, snd int, ok bool) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var rerr, serr error
	if err := raw.Control(func(fd uintptr) {
		rcv, rerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		snd, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
	}); err != nil {
		return 0, 0, false
	}
	return rcv, snd, rerr == nil && serr == nil
}

// enableRxTimestamps asks the kernel to stamp each datagram the socket
// receives with the time it arrived (SO_TIMESTAMPNS), and says whether
// it will.
func enableRxTimestamps(c *net.UDPConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return false
	}
	return serr == nil
}

// cutRxTimestamp takes the kernel's arrival stamp out of a datagram's
// control messages, in place: the rest, and the stamp in nanoseconds
// since 1970 (0 without one).
func cutRxTimestamp(oob []byte) (rest []byte, stamp int64) {
	at := 0
	for b := oob[at:]; len(b) > 0; b = oob[at:] {
		h, body, next, err := unix.ParseOneSocketControlMessage(b)
		if err != nil {
			return oob, 0
		}
		if h.Level != unix.SOL_SOCKET || h.Type != unix.SCM_TIMESTAMPNS {
			at += len(b) - len(next)
			continue
		}
		switch len(body) { // a struct timespec: two longs
		case 16:
			stamp = int64(binary.NativeEndian.Uint64(body))*1e9 + int64(binary.NativeEndian.Uint64(body[8:]))
		case 8:
			stamp = int64(int32(binary.NativeEndian.Uint32(body)))*1e9 + int64(int32(binary.NativeEndian.Uint32(body[4:])))
		}
		n := copy(oob[at:], next)
		return oob[:at+n], stamp
	}
	return oob, 0
}

// socketHolds reports whether datagrams wait in the socket's receive
// buffer (SIOCINQ: the length of the next one, 0 when none waits; an
// empty datagram waiting reads as none).
func socketHolds(c *net.UDPConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var n int
	var ierr error
	if err := raw.Control(func(fd uintptr) {
		n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	}); err != nil {
		return false
	}
	return ierr == nil && n > 0
}
