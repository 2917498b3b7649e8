package ops

import (
	"runtime"
	"slices"
	"strings"
	"time"
)

// Status returns the node's status as the status page shows it.
func (s *HTTPServer) Status() Status { return s.status(Everything) }

// status builds the status to the given depth. Every call samples the
// partitions' counters for the throughput rates.
func (s *HTTPServer) status(depth Depth) Status {
	now := s.cfg.Now()
	var ms runtime.MemStats
	if depth == Everything {
		runtime.ReadMemStats(&ms) // stops the world briefly: not for the sampler
	}
	st := Status{
		Time:       now,
		Topics:     []TopicStatus{},
		Consumers:  []ConsumerStatus{},
		Plugins:    []PluginStatus{},
		Uplinks:    []UplinkTopicStatus{},
		Downlinks:  []DownlinkStatus{},
		Transforms: []TransformStatus{},
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
	s.m.ref.with(func(n Source) {
		snap := n.Snapshot(depth)
		st.Node.Listen, st.Node.DataDir = snap.Listen, snap.DataDir
		st.Node.DiskFreeBytes, st.Node.DiskTotalBytes = snap.DiskFree, snap.DiskTotal
		tr := snap.Transport
		st.Transport = TransportStatus{
			ConnectionsOpen: tr.ConnsOpen, ConnectionsAccepted: tr.ConnsAccepted, ConnectionsRefused: tr.ConnsRefused,
			AuthFailures: tr.AuthFailures, StreamsOpen: tr.StreamsOpen, RequestsInFlight: tr.RequestsInFlight,
			InflightBytes: tr.BudgetInUse, InflightBudgetBytes: tr.BudgetCapacity, BackpressureWaits: tr.BudgetWaits,
			ParkedPolls: snap.Parked, MaxParkedPolls: snap.MaxParked,
		}
		live := map[rateKey]bool{}
		for _, t := range snap.Topics {
			ts, cs := s.topicStatus(t, now, live)
			st.Topics = append(st.Topics, ts)
			st.Consumers = append(st.Consumers, cs...)
		}
		s.rates.keep(live)
		st.Consumers = addGroups(s.m.ref.groups, st.Consumers)
		if p := s.m.ref.plugins; p != nil {
			st.Plugins = append(st.Plugins, p.PluginStatuses()...)
		}
		if depth == Everything {
			st.Uplinks = uplinkStatuses(n.Uplinks())
			st.Downlinks = downlinkStatuses(n.Downlinks(), now)
			if tl, ok := n.(TransformLister); ok {
				st.Transforms = append(st.Transforms, tl.TransformStatuses()...)
			}
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
func (s *HTTPServer) topicStatus(t TopicSnapshot, now time.Time, live map[rateKey]bool) (TopicStatus, []ConsumerStatus) {
	ts := TopicStatus{
		Name: t.Name, ID: t.ID.String(),
		Durability: t.Config.Durability.String(), Compression: t.Config.Compression.String(), Timestamps: t.Config.Timestamps.String(),
		RetentionAgeSeconds: t.Config.RetentionAge.Seconds(), RetentionBytes: t.Config.RetentionBytes,
		Partitions: []PartitionStatus{},
	}
	consumers := map[[2]string]*ConsumerStatus{}
	var order [][2]string
	for _, p := range t.Parts {
		ls := p.State
		ps := PartitionStatus{
			Partition: p.Index, LogStart: ls.LogStart, HighWatermark: ls.HighWatermark, HistoryEpoch: uint64(ls.History),
			SizeBytes: p.Size,
		}
		if ls.HighWatermark > ls.LogStart {
			ps.SkippedOffsets = min(p.Stats.SkippedOffsets, ls.HighWatermark-ls.LogStart)
			ps.Records = ls.HighWatermark - ls.LogStart - ps.SkippedOffsets
		}
		if ls.Failed != nil {
			ps.Failed = ls.Failed.Error()
		}
		ps.Appends, ps.AppendedBytes = p.Stats.Appends, p.Stats.AppendedBytes
		ps.DeliveredBytes = s.m.deliveredBytes(t.Name, p.Index)
		k := rateKey{topic: t.Name, id: t.ID, partition: p.Index}
		live[k] = true
		ps.RecordsPerSecond, ps.BytesPerSecond = s.rates.observe(k, rateSample{at: now, records: ls.HighWatermark, bytes: ps.AppendedBytes})

		ts.Partitions = append(ts.Partitions, ps)
		ts.Records += ps.Records
		ts.RecordsPerSecond += ps.RecordsPerSecond
		ts.BytesPerSecond += ps.BytesPerSecond
		if p.Size < 0 || ts.SizeBytes < 0 {
			ts.SizeBytes = -1
		} else {
			ts.SizeBytes += p.Size
		}

		for _, c := range p.Consumers {
			key := [2]string{c.Kind, c.Name}
			cs := consumers[key]
			if cs == nil {
				cs = &ConsumerStatus{Name: c.Name, Kind: c.Kind, Topic: t.Name}
				consumers[key] = cs
				order = append(order, key)
			}
			cs.Lag += c.Lag
			cs.Partitions = append(cs.Partitions, ConsumerPartition{
				Partition: p.Index, Committed: c.Committed.Offset, CommittedHistory: uint64(c.Committed.History),
				Position: c.Position, Lag: c.Lag,
			})
		}
	}
	out := make([]ConsumerStatus, 0, len(order))
	for _, k := range order {
		out = append(out, *consumers[k])
	}
	return ts, out
}
