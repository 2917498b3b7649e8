package ops

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Scrape-time metrics: read from the attached node when /metrics is
// scraped, so they are never stale and cost nothing between scrapes.

func partitionDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"topic", "partition"}, nil)
}

func consumerDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"topic", "partition", "consumer", "kind"}, nil)
}

func nodeDesc(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }

// stateDescs are the scrape-time metrics.
type stateDescs struct {
	hw, start, epoch, records, skipped, size, failed     *prometheus.Desc
	appends, appendedBytes, deliveredBytes               *prometheus.Desc
	partSyncFailures, noSpace                            *prometheus.Desc
	keyPollsParked, keyPollWakeups                       *prometheus.Desc
	committed, lag                                       *prometheus.Desc
	topics, partitions                                   *prometheus.Desc
	connsOpen, connsAccepted, connsRefused, authFailures *prometheus.Desc
	connsUnauth, connsEvicted, retries, handshakeWait    *prometheus.Desc
	streamsOpen, streamsAccepted                         *prometheus.Desc
	inFlight, inflightBytes, inflightBudget, bpWaits     *prometheus.Desc
	framesTooLarge, protocolErrors, receivedBytes        *prometheus.Desc
	parked, parkedLimit, diskFree, diskTotal, ready      *prometheus.Desc
	diskFull, diskReserved, metaBackgroundErrors         *prometheus.Desc
	pluginCalls, pluginFailures, pluginTimeouts          *prometheus.Desc
	pluginTraps, pluginStrikes, pluginQuarantined        *prometheus.Desc
}

func pluginDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"plugin", "kind"}, nil)
}

func newStateDescs() stateDescs {
	return stateDescs{
		hw:                   partitionDesc("ledge_partition_high_watermark", "Exclusive end of what readers may see (the next offset to be handed out)."),
		start:                partitionDesc("ledge_partition_log_start_offset", "First offset readers may ask for; raised by retention and purge."),
		epoch:                partitionDesc("ledge_partition_history_epoch", "History epoch; bumped by purge and by a recovery that lost records."),
		records:              partitionDesc("ledge_partition_records", "Records readers may see: high watermark minus log start, less the offsets recoveries skipped."),
		skipped:              partitionDesc("ledge_partition_skipped_offsets", "Offsets between log start and high watermark that recoveries skipped after unclean stops: they hold no record."),
		size:                 partitionDesc("ledge_partition_size_bytes", "Size of the partition's files on disk."),
		failed:               partitionDesc("ledge_partition_failed", "1 while the partition refuses appends until a restart (failed fsync, corrupt log)."),
		appends:              partitionDesc("ledge_partition_appends_total", "Record batches appended since the node started."),
		appendedBytes:        partitionDesc("ledge_partition_appended_bytes_total", "Bytes of record batches appended since the node started."),
		deliveredBytes:       partitionDesc("ledge_partition_delivered_bytes_total", "Bytes of record batches returned by polls since the node started."),
		partSyncFailures:     partitionDesc("ledge_partition_fsync_failures_total", "Failed fsyncs of the partition's segments; the partition fails until restart."),
		noSpace:              partitionDesc("ledge_partition_no_space_refusals_total", "Record batches refused because the disk was full."),
		keyPollsParked:       partitionDesc("ledge_partition_key_polls_parked", "Long polls that name a key (commands to one device), parked in the partition's key index."),
		keyPollWakeups:       partitionDesc("ledge_partition_key_poll_wakeups_total", "Wake-ups of parked key polls: by a record of their key (once, also when the poll then waits for it to be visible), a purge, or the high watermark passing an append the poll may have missed while it parked. Per appended command, about 1."),
		committed:            consumerDesc("ledge_consumer_committed_offset", "Committed offset (the next offset to read) of a named consumer or group, in the current history: one committed before a purge counts at the new log start."),
		lag:                  consumerDesc("ledge_consumer_lag_records", "Records between where the consumer resumes and the high watermark."),
		topics:               nodeDesc("ledge_topics", "Topics served."),
		partitions:           nodeDesc("ledge_partitions", "Partitions served."),
		connsOpen:            nodeDesc("ledge_connections_open", "QUIC connections open."),
		connsAccepted:        nodeDesc("ledge_connections_accepted_total", "QUIC connections that completed the handshake."),
		connsRefused:         prometheus.NewDesc("ledge_connections_refused_total", "QUIC connections refused, by reason: limit (quic.max_conns), token_limit (quic.max_conns_per_token), source_rate (quic.source_handshake_rate), handshakes (the node behind with its handshakes), shutdown.", []string{"reason"}, nil),
		connsUnauth:          nodeDesc("ledge_connections_unauthenticated", "QUIC connections handshaking or waiting to authenticate (bounded by quic.max_unauthenticated)."),
		connsEvicted:         nodeDesc("ledge_connections_evicted_total", "Unauthenticated connections closed to make room for newer ones (quic.max_unauthenticated)."),
		retries:              nodeDesc("ledge_connections_address_validations_total", "Connection attempts asked to prove their address with a QUIC Retry (under load)."),
		handshakeWait:        nodeDesc("ledge_connections_handshake_wait_seconds", "The least time the handshakes the node took up over the last 100 ms had waited for it, from their first packet; past the handshake wait target new connections are refused (reason handshakes)."),
		authFailures:         nodeDesc("ledge_auth_failures_total", "Connections closed because authentication failed or timed out."),
		streamsOpen:          nodeDesc("ledge_streams_open", "QUIC streams open."),
		streamsAccepted:      nodeDesc("ledge_streams_accepted_total", "QUIC streams accepted."),
		inFlight:             nodeDesc("ledge_requests_in_flight", "Requests read and not yet answered."),
		inflightBytes:        nodeDesc("ledge_inflight_bytes", "Bytes of requests read and not yet answered."),
		inflightBudget:       nodeDesc("ledge_inflight_budget_bytes", "The in-flight budget (quic.inflight_budget)."),
		bpWaits:              nodeDesc("ledge_backpressure_waits_total", "Stream reads that waited for the in-flight budget (backpressure)."),
		framesTooLarge:       nodeDesc("ledge_frames_too_large_total", "Streams reset because a frame exceeded quic.max_frame_size."),
		protocolErrors:       nodeDesc("ledge_protocol_errors_total", "Streams reset because of a malformed frame."),
		receivedBytes:        nodeDesc("ledge_received_bytes_total", "Bytes of request frames read."),
		parked:               nodeDesc("ledge_parked_polls", "Long polls waiting for records."),
		parkedLimit:          nodeDesc("ledge_parked_polls_limit", "The parked poll limit (polls.max_parked)."),
		diskFree:             nodeDesc("ledge_disk_free_bytes", "Space available on the file system of the data directory."),
		diskTotal:            nodeDesc("ledge_disk_total_bytes", "Size of the file system of the data directory."),
		ready:                nodeDesc("ledge_ready", "1 when /readyz answers ready."),
		diskFull:             nodeDesc("ledge_disk_full", "1 while the disk is full: appends are refused (retryable) until space is freed; they resume by themselves."),
		diskReserved:         nodeDesc("ledge_disk_reserved", "1 while the reserved space (the ballast file) holds its room; 0 once a full disk gave it to metadata, purge and retention."),
		metaBackgroundErrors: nodeDesc("ledge_metadata_background_errors_total", "Background errors of the metadata store (a table it could not write, normally for lack of space); its retries are paced."),
		pluginCalls:          pluginDesc("ledge_plugin_calls_total", "Calls that reached the plugin."),
		pluginFailures:       pluginDesc("ledge_plugin_failures_total", "Calls of the plugin that failed, for any reason."),
		pluginTimeouts:       pluginDesc("ledge_plugin_timeouts_total", "Calls of the plugin cut off at their deadline."),
		pluginTraps:          pluginDesc("ledge_plugin_traps_total", "Calls of the plugin that trapped."),
		pluginStrikes:        pluginDesc("ledge_plugin_strikes", "Failures held against the plugin; at the limit it is quarantined."),
		pluginQuarantined:    pluginDesc("ledge_plugin_quarantined", "1 while the plugin is quarantined."),
	}
}

// stateCollector reads the attached node at scrape time.
type stateCollector struct {
	m *PromMetrics
	d stateDescs
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	d := c.d
	for _, x := range []*prometheus.Desc{
		d.hw, d.start, d.epoch, d.records, d.skipped, d.size, d.failed, d.appends, d.appendedBytes, d.deliveredBytes,
		d.partSyncFailures, d.noSpace, d.keyPollsParked, d.keyPollWakeups,
		d.committed, d.lag, d.topics, d.partitions, d.connsOpen, d.connsAccepted, d.connsRefused, d.authFailures,
		d.connsUnauth, d.connsEvicted, d.retries, d.handshakeWait, d.streamsOpen, d.streamsAccepted, d.inFlight, d.inflightBytes, d.inflightBudget, d.bpWaits,
		d.framesTooLarge, d.protocolErrors, d.receivedBytes, d.parked, d.parkedLimit, d.diskFree, d.diskTotal, d.ready,
		d.diskFull, d.diskReserved, d.metaBackgroundErrors,
		d.pluginCalls, d.pluginFailures, d.pluginTimeouts, d.pluginTraps, d.pluginStrikes, d.pluginQuarantined,
	} {
		ch <- x
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, labels...)
	}
	if known, ok, _ := c.m.readiness(); known {
		gauge(d.ready, b2f(ok))
	}
	c.m.ref.with(func(n Source) {
		s := n.Snapshot(Everything)
		parts := 0
		for _, t := range s.Topics {
			for _, p := range t.Parts {
				parts++
				l := []string{t.Name, strconv.FormatUint(uint64(p.Index), 10)}
				st := p.State
				gauge(d.hw, float64(st.HighWatermark), l...)
				gauge(d.start, float64(st.LogStart), l...)
				gauge(d.epoch, float64(st.History), l...)
				offsets := st.HighWatermark - min(st.LogStart, st.HighWatermark)
				skipped := min(p.Stats.SkippedOffsets, offsets)
				gauge(d.records, float64(offsets-skipped), l...)
				gauge(d.skipped, float64(skipped), l...)
				if p.Size >= 0 {
					gauge(d.size, float64(p.Size), l...)
				}
				gauge(d.failed, b2f(st.Failed != nil), l...)
				if p.HasStats {
					counter(d.appends, float64(p.Stats.Appends), l...)
					counter(d.appendedBytes, float64(p.Stats.AppendedBytes), l...)
					counter(d.partSyncFailures, float64(p.Stats.SyncFailures), l...)
					counter(d.noSpace, float64(p.Stats.NoSpace), l...)
				}
				counter(d.deliveredBytes, float64(c.m.deliveredBytes(t.Name, p.Index)), l...)
				gauge(d.keyPollsParked, float64(p.KeyPolls.Parked), l...)
				counter(d.keyPollWakeups, float64(p.KeyPolls.Woken), l...)
				for _, cs := range p.Consumers {
					cl := append(l[:2:2], cs.Name, cs.Kind)
					gauge(d.committed, float64(cs.Position), cl...)
					gauge(d.lag, float64(cs.Lag), cl...)
				}
			}
		}
		gauge(d.topics, float64(len(s.Topics)))
		gauge(d.partitions, float64(parts))
		tr := s.Transport
		gauge(d.connsOpen, float64(tr.ConnsOpen))
		counter(d.connsAccepted, float64(tr.ConnsAccepted))
		counter(d.connsRefused, float64(tr.RefusedLimit), "limit")
		counter(d.connsRefused, float64(tr.RefusedToken), "token_limit")
		counter(d.connsRefused, float64(tr.RefusedSource), "source_rate")
		counter(d.connsRefused, float64(tr.RefusedHandshakes), "handshakes")
		counter(d.connsRefused, float64(tr.RefusedShutdown), "shutdown")
		gauge(d.connsUnauth, float64(tr.Unauthenticated))
		counter(d.connsEvicted, float64(tr.Evicted))
		counter(d.retries, float64(tr.RetriesDemanded))
		gauge(d.handshakeWait, tr.HandshakeWait.Seconds())
		counter(d.authFailures, float64(tr.AuthFailures))
		gauge(d.streamsOpen, float64(tr.StreamsOpen))
		counter(d.streamsAccepted, float64(tr.StreamsAccepted))
		gauge(d.inFlight, float64(tr.RequestsInFlight))
		gauge(d.inflightBytes, float64(tr.BudgetInUse))
		gauge(d.inflightBudget, float64(tr.BudgetCapacity))
		counter(d.bpWaits, float64(tr.BudgetWaits))
		counter(d.framesTooLarge, float64(tr.FramesTooLarge))
		counter(d.protocolErrors, float64(tr.ProtocolErrors))
		counter(d.receivedBytes, float64(tr.BytesRead))
		gauge(d.parked, float64(s.Parked))
		gauge(d.parkedLimit, float64(s.MaxParked))
		if s.DiskTotal > 0 {
			gauge(d.diskFree, float64(s.DiskFree))
			gauge(d.diskTotal, float64(s.DiskTotal))
		}
		if sp, ok := n.DiskSpace(); ok {
			gauge(d.diskFull, b2f(sp.Full))
			gauge(d.diskReserved, b2f(sp.Reserved))
			counter(d.metaBackgroundErrors, float64(sp.MetadataErrors))
		}
		if pl := c.m.ref.plugins; pl != nil {
			for _, p := range pl.PluginStatuses() {
				counter(d.pluginCalls, float64(p.Calls), p.Name, p.Kind)
				counter(d.pluginFailures, float64(p.Failures), p.Name, p.Kind)
				counter(d.pluginTimeouts, float64(p.Timeouts), p.Name, p.Kind)
				counter(d.pluginTraps, float64(p.Traps), p.Name, p.Kind)
				gauge(d.pluginStrikes, float64(p.Strikes), p.Name, p.Kind)
				gauge(d.pluginQuarantined, b2f(p.State == "quarantined"), p.Name, p.Kind)
			}
		}
	})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
