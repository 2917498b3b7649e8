package ops

// PluginLister is what the status page and /metrics read of the plugin
// host: every plugin's kind, counters and state. The node's plugin
// registry implements it over the host's statistics.
type PluginLister interface {
	PluginStatuses() []PluginStatus
}

// AttachPlugins hands the server the node's plugin host: the status page
// then lists every plugin, and /metrics reports its calls, failures and
// strikes. Stopping detaches it with the node.
func (s *HTTPServer) AttachPlugins(p PluginLister) { s.m.ref.setPlugins(p) }
