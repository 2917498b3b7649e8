package sdk

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"syscall"
	"time"
)

// errNotListening is the cause of a dial the probe cut short.
var errNotListening = errors.New("the host answered that no process listens on that UDP port")

// probeWait bounds how long the probe waits for the host's answer: a
// refusal comes back within a round trip; a node that listens answers
// nothing to the probe.
const probeWait = 5 * time.Second

// probeNotListening reports whether the host at addr answers a datagram
// to its port with an ICMP port unreachable: nothing listens there. A
// connected UDP socket hears of that refusal; the QUIC dial's own socket
// does not. The one-byte datagram is shorter than any QUIC packet: a node
// drops it. A host that answers nothing (a node, a firewall), or a probe
// that cannot be sent, says false.
func probeNotListening(ctx context.Context, addr string) bool {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	_ = conn.SetDeadline(time.Now().Add(probeWait))
	if _, err := conn.Write([]byte{0}); err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	var b [1]byte
	_, err = conn.Read(b[:])
	return errors.Is(err, syscall.ECONNREFUSED)
}

// unreachable reports whether a failed dial found no node: not a node
// that answered and refused (credentials, certificates), nor a canceled
// dial.
func unreachable(err error) bool {
	var se *Error
	var unknownCA x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, ErrNoCredentials), errors.Is(err, ErrClosed),
		refusedForNow(err), errors.As(err, &se), errors.As(err, &unknownCA), errors.As(err, &verify),
		errors.As(err, &hostname), errors.As(err, &invalid):
		return false
	}
	return true
}
