// Package pluginreg is a node's plugin registry: WebAssembly modules
// stored content-addressed under Dir (one file per digest, created write →
// fsync → rename → fsync directory), their names, kinds, quarantines and
// the commit policies attached to consumers in the metadata store, and
// the host that runs them. Every registered plugin is added to the host
// again after the node starts, in the background (load.go); a module that
// is missing or does not match its digest is logged and left out (polls
// naming it fail with an unknown-plugin error saying why) rather than
// keeping the node down.
//
// It also holds the plugin steps of a poll (poll.go): the filter a poll
// names, run on each partition's immutable read result, and the commit
// policy run on what a poll delivered, whose proposal the owner applies
// only if the poll's token is still current. It serves no request: the
// handlers of the plugin kinds are package node's.
package pluginreg
