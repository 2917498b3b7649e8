package sdk

import (
	"net"

	"github.com/ledgemq/ledge/transport/quic"
)

// Transport is one UDP socket that many clients of a process share:
// a gateway relaying for hundreds of devices, each with a client (and a
// token) of its own, then holds one socket and one goroutine reading it,
// not one of each per device. Each client keeps its own QUIC connection
// (its own TLS session, flow control and failures) on the shared socket.
//
// Close the clients before the Transport: closing it ends their
// connections abruptly, and they cannot reconnect through it.
type Transport struct{ t *quic.Transport }

// NewTransport opens a UDP socket on any local address and a free port.
func NewTransport() (*Transport, error) {
	t, err := quic.NewTransport("")
	if err != nil {
		return nil, transportError("open a shared socket", err)
	}
	return &Transport{t: t}, nil
}

// LocalAddr returns the socket's address.
func (t *Transport) LocalAddr() net.Addr { return t.t.LocalAddr() }

// Close closes the socket and every connection still on it.
func (t *Transport) Close() error { return t.t.Close() }

// WithTransport makes the client connect (and reconnect) over t, a socket
// it shares with other clients of the process.
//
// Default: each connection opens a socket of its own, closed with it. A
// nil t keeps the default.
func WithTransport(t *Transport) Option {
	return clientOption(func(c *clientConfig) {
		if t != nil {
			c.transport = t.t
		}
	})
}
