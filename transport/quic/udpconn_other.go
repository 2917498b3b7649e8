//go:build !linux

package quic

import "net"

// enableGRO reports that the kernel does not coalesce datagrams here.
func enableGRO(*net.UDPConn) bool { return false }

func groSegmentSize([]byte) int { return 0 }

// socketBuffers reports that the buffers are not read here.
func socketBuffers(*net.UDPConn) (rcv, snd int, ok bool) { return 0, 0, false }

// enableRxTimestamps reports that datagrams are not stamped here: the
// listener measures no wait in its socket (ReceiveQueueDelay is 0).
func enableRxTimestamps(*net.UDPConn) bool { return false }

func cutRxTimestamp(oob []byte) ([]byte, int64) { return oob, 0 }

func socketHolds(*net.UDPConn) bool { return false }
