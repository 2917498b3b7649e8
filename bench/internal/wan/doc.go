// Package wan builds a small WAN on this machine for the comparison: a
// network namespace for the servers, reached from the load generator over
// a point-to-point link that delays every packet by half the round trip
// and drops a share of them in each direction.
//
// The link is a veth pair shaped with tc netem where the kernel has netem;
// where it does not, two TUN devices joined by a userspace forwarder
// (Emulator) that applies the same delay and loss to the same IP packets.
// Both ends of the link are in namespaces this package creates; nothing
// leaves the machine and no other address is used.
package wan
