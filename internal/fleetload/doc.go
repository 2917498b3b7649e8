// Package fleetload drives a fleet of devices against a message node: N
// connections of one process, each producing small records at a steady
// rate with jitter and holding a long poll for commands that a
// controller sends to one device at a time. It measures what an edge
// gateway's clients see: connections set up and held, produce latency
// from each record's scheduled send time (so a stall cannot hide), and
// command delivery latency (write to the device's poll returning), and,
// where the node says (WakeCounter), how many parked polls each command
// woke. Over the measured phase it also reads the machine's UDP counters
// (datagrams per record) and, where the node says (GCCounter), its
// garbage collections.
//
// The harness is independent of the system under test (System); Ledge's
// devices are here (NewLedge), JetStream's in the bench module.
package fleetload
