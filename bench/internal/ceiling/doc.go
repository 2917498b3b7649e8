// Package ceiling measures what this machine can do at all, in the same
// run as the comparison: a raw quic-go stream on loopback (the parent
// module's internal/quicceiling, which `ledge bench` measures too),
// sequential writes to the page cache, and 64 KiB
// writes each followed by fdatasync. Across processes (cmd/rawsink at
// the far end) it measures raw streams over a link or placed as the
// servers are, and one-at-a-time round trips of a 1 KiB message and a
// 32-byte reply over a raw quic-go stream and over TLS 1.3 on TCP. A
// server is judged against these.
package ceiling
