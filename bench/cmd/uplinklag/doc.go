// Command uplinklag measures a Kafka uplink on this machine: forwarding
// throughput of 1 KiB records into an in-process Kafka (franz-go's kfake)
// against local produce throughput in the same run, and the uplink's lag
// over time (records and age of the oldest unforwarded record) while
// records arrive at a steady rate through a Kafka outage and its recovery.
//
// It runs the node's own pieces in one process: the storage engine on a
// real disk, a partition owner, and the uplink's transactional forwarder
// (node.Forwarder), and writes a markdown report, the raw samples (JSON)
// and two charts to --out:
//
//	cd bench && go run ./cmd/uplinklag            # ~50 s
//	go run ./cmd/uplinklag --quick                # ~12 s, proves the harness
//	go run ./cmd/uplinklag --render results/uplink-lag.json   # redraw only
//
// The phases, each on a fresh topic:
//
//  1. local: produce alone, as fast as one producer goes (the ceiling);
//  2. forward: the same producer and the forwarder at once, both as fast
//     as they go: produce and forwarding throughput of the same run;
//  3. lag: produce at a steady rate (a share of the forwarding throughput
//     measured in phase 2), Kafka refusing every request for a window in
//     the middle; the lag is sampled every 100 ms.
package main
