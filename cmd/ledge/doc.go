// Command ledge is the Ledge message node and its command-line client.
//
// One binary serves the node (ledge serve), administers it (topic, token,
// plugin, group, uplink, state, status) and talks to it as a client
// (produce, consume), and measures it (bench). The serve command turns
// flags and the configuration file (internal/config) into a node.Config
// and runs the node until a signal stops it; every other command is a
// client of a running node through package sdk, found by the data
// directory's certificates and admin token.
//
// It holds no logic of the node itself: what a command does on the node
// is a request the node serves, so that scripts and programs get the same
// through the SDK.
package main
