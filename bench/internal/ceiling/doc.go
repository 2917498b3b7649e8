// Package ceiling measures what this machine can do at all, in the same
// run as the comparison: a raw quic-go stream on loopback (the parent
// module's internal/quicceiling, which `ledge bench` measures too),
// sequential writes to the page cache, and 64 KiB
// writes each followed by fdatasync. A server is judged against these.
package ceiling
