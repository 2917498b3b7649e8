package quic

import (
	"net"

	quicgo "github.com/quic-go/quic-go"
)

// Transport is one UDP socket that many client connections share. Without
// one, every connection (every dial attempt) opens a socket of its own,
// with a goroutine reading it: a gateway relaying for hundreds of devices,
// or a load generator holding thousands of connections, would hold as many
// sockets and readers. Connections on a shared socket are told apart by
// their connection ids; each still has its own TLS session and flow
// control, so one device's connection failing does not affect the others.
// A Transport is safe for concurrent use.
type Transport struct {
	qt   *quicgo.Transport
	sock *yieldingConn
}

// NewTransport opens a UDP socket on addr (host:port; "" for any address
// and a free port) for client connections to share (see
// [ClientConfig.Transport]).
func NewTransport(addr string) (*Transport, error) {
	laddr := &net.UDPAddr{IP: net.IPv4zero}
	if addr != "" {
		var err error
		if laddr, err = net.ResolveUDPAddr("udp", addr); err != nil {
			return nil, err
		}
	}
	sock, err := listenUDP(laddr)
	if err != nil {
		return nil, err
	}
	return &Transport{qt: &quicgo.Transport{Conn: sock}, sock: sock}, nil
}

// LocalAddr returns the socket's address.
func (t *Transport) LocalAddr() net.Addr { return t.sock.LocalAddr() }

// Close closes the socket and every connection on it, abruptly: close the
// connections first for them to end cleanly.
func (t *Transport) Close() error {
	err := t.qt.Close()
	if cerr := t.sock.Close(); err == nil {
		err = cerr
	}
	return err
}
