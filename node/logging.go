package node

// logRecovered logs the recovery result of every partition, one line
// each: the offsets and history epoch it is served with (info), or why it
// is not served (error). Open calls it once the storage is open.
func (n *Node) logRecovered() {
	for _, t := range n.topicList() {
		for i, l := range t.logs {
			st := l.State()
			if st.Failed != nil {
				n.log.Error("partition not served: its log failed recovery", "topic", t.name, "partition", i, "err", st.Failed)
				continue
			}
			n.log.Info("partition recovered", "topic", t.name, "partition", i,
				"log_start", st.LogStart, "high_watermark", st.HighWatermark, "history_epoch", uint64(st.History))
		}
	}
}
