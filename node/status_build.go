package node

import (
	"runtime"
	"slices"
	"strings"
	"time"
)

// Status returns the node's status as the status page shows it.
func (s *HTTPServer) Status() Status { return s.status(everything) }

// status builds the status to the given depth. Every call samples the
// partitions' counters for the throughput rates.
func (s *HTTPServer) status(depth snapshotDepth) Status {
	now := s.cfg.Now()
	var ms runtime.MemStats
	if depth == everything {
		runtime.ReadMemStats(&ms) // stops the world briefly: not for the sampler
	}
	st := Status{
		Time:      now,
		Topics:    []TopicStatus{},
		Consumers: []ConsumerStatus{},
		Plugins:   []PluginStatus{},
		Uplinks:   []UplinkTopicStatus{},
		Node: NodeInfo{
			Version:       s.cfg.Version,
			GoVersion:     runtime.Version(),
			Platform:      runtime.GOOS + "/" + runtime.GOARCH,
			StartedAt:     s.started,
			UptimeSeconds: now.Sub(s.started).Seconds(),
			HTTP:          s.Addr(),
			HeapBytes:     ms.HeapInuse,
			Goroutines:    runtime.NumGoroutine(),
		},
	}
	st.Health = s.health()
	s.m.ref.with(func(n *Node) {
		snap := n.snapshot(depth)
		st.Node.Listen, st.Node.DataDir = snap.listen, snap.dataDir
		st.Node.DiskFreeBytes, st.Node.DiskTotalBytes = snap.diskFree, snap.diskTotal
		tr := snap.transport
		st.Transport = TransportStatus{
			ConnectionsOpen: tr.ConnsOpen, ConnectionsAccepted: tr.ConnsAccepted, ConnectionsRefused: tr.ConnsRefused,
			AuthFailures: tr.AuthFailures, StreamsOpen: tr.StreamsOpen, RequestsInFlight: tr.RequestsInFlight,
			InflightBytes: tr.BudgetInUse, InflightBudgetBytes: tr.BudgetCapacity, BackpressureWaits: tr.BudgetWaits,
			ParkedPolls: snap.parked, MaxParkedPolls: snap.maxParked,
		}
		live := map[rateKey]bool{}
		for _, t := range snap.topics {
			ts, cs := s.topicStatus(t, now, live)
			st.Topics = append(st.Topics, ts)
			st.Consumers = append(st.Consumers, cs...)
		}
		s.rates.keep(live)
		st.Consumers = addGroups(s.m.ref.groups, st.Consumers)
		if p := s.m.ref.plugins; p != nil {
			st.Plugins = append(st.Plugins, p.PluginStatuses()...)
		}
		if depth == everything {
			st.Uplinks = uplinkStatuses(n.uplinks)
		}
	})
	slices.SortFunc(st.Consumers, func(a, b ConsumerStatus) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return st
}

// topicStatus describes one topic and the consumers with a bookmark on it.
func (s *HTTPServer) topicStatus(t topicSnapshot, now time.Time, live map[rateKey]bool) (TopicStatus, []ConsumerStatus) {
	ts := TopicStatus{
		Name: t.name, ID: t.id.String(),
		Durability: t.cfg.Durability.String(), Compression: t.cfg.Compression.String(), Timestamps: t.cfg.Timestamps.String(),
		RetentionAgeSeconds: t.cfg.RetentionAge.Seconds(), RetentionBytes: t.cfg.RetentionBytes,
		Partitions: []PartitionStatus{},
	}
	consumers := map[[2]string]*ConsumerStatus{}
	var order [][2]string
	for _, p := range t.parts {
		ls := p.state
		ps := PartitionStatus{
			Partition: p.index, LogStart: ls.LogStart, HighWatermark: ls.HighWatermark, HistoryEpoch: uint64(ls.History),
			SizeBytes: p.size,
		}
		if ls.HighWatermark > ls.LogStart {
			ps.Records = ls.HighWatermark - ls.LogStart
		}
		if ls.Failed != nil {
			ps.Failed = ls.Failed.Error()
		}
		ps.Appends, ps.AppendedBytes = p.stats.Appends, p.stats.AppendedBytes
		ps.DeliveredBytes = s.m.deliveredBytes(t.name, p.index)
		k := rateKey{topic: t.name, id: t.id, partition: p.index}
		live[k] = true
		ps.RecordsPerSecond, ps.BytesPerSecond = s.rates.observe(k, rateSample{at: now, records: ls.HighWatermark, bytes: ps.AppendedBytes})

		ts.Partitions = append(ts.Partitions, ps)
		ts.Records += ps.Records
		ts.RecordsPerSecond += ps.RecordsPerSecond
		ts.BytesPerSecond += ps.BytesPerSecond
		if p.size < 0 || ts.SizeBytes < 0 {
			ts.SizeBytes = -1
		} else {
			ts.SizeBytes += p.size
		}

		for _, c := range p.consumers {
			key := [2]string{c.kind, c.name}
			cs := consumers[key]
			if cs == nil {
				cs = &ConsumerStatus{Name: c.name, Kind: c.kind, Topic: t.name}
				consumers[key] = cs
				order = append(order, key)
			}
			cs.Lag += c.lag
			cs.Partitions = append(cs.Partitions, ConsumerPartition{
				Partition: p.index, Committed: c.committed.Offset, CommittedHistory: uint64(c.committed.History),
				Position: c.position, Lag: c.lag,
			})
		}
	}
	out := make([]ConsumerStatus, 0, len(order))
	for _, k := range order {
		out = append(out, *consumers[k])
	}
	return ts, out
}
