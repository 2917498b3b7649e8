// Package ops serves a node to its operators over HTTP: Prometheus
// metrics (/metrics), liveness and readiness (/healthz, /readyz), the status
// API (/api/status) and the status page, and pprof when asked for.
//
// It reads a node only through Source (snapshots of its topics,
// partitions and consumers, its disk, its readiness checks, its uplinks),
// and the group coordinator and plugin host through GroupDescriber and
// PluginLister: it changes nothing and takes no owner's lock. *node.Node
// is a Source; node imports this package, never the reverse. The
// request-path hooks (node.Config.Metrics) are PromMetrics, handed to the
// node when it opens.
package ops
