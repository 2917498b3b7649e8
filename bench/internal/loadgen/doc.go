// Package loadgen is the load generator: one set of workloads — async
// produce with an in-flight window, one-at-a-time produce, several
// producers at once, an open-loop fixed rate, a replay from the start —
// run against any system through the small Driver interface, so Ledge
// and NATS JetStream are driven by the same code, with the same seeded
// payloads, the same window and the same clocks.
//
// Latencies go into HDR histograms in microseconds. In the open-loop
// workload a message's latency runs from the time it was scheduled to be
// sent, not from when the sender got round to it, so a stalled server
// cannot hide behind a stalled sender (coordinated omission).
package loadgen
