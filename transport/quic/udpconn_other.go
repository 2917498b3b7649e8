//go:build !linux

package quic

import "net"

// enableGRO reports that the kernel does not coalesce datagrams here.
func enableGRO(*net.UDPConn) bool { return false }

func groSegmentSize([]byte) int { return 0 }
