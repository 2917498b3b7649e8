package wan

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// DefaultTCPCongestion is the congestion control the WAN run gives TCP:
// Cubic, as quic-go has (it implements no other). Linux may default to
// BBR, which does not slow down for random loss; over a lossy link the
// comparison would then measure congestion controllers, not transports.
const DefaultTCPCongestion = "cubic"

// TCPCongestionControl returns a net.Dialer Control function that gives
// each TCP socket the congestion control cc; with cc empty, the system's.
func TCPCongestionControl(cc string) func(network, address string, c syscall.RawConn) error {
	if cc == "" {
		return nil
	}
	return func(network, _ string, c syscall.RawConn) error {
		if network != "tcp" && network != "tcp4" && network != "tcp6" {
			return nil
		}
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc)
		})
		if err == nil && serr != nil {
			err = fmt.Errorf("wan: TCP congestion control %q: %w", cc, serr)
		}
		return err
	}
}
