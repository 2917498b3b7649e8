// Command ledge is the Ledge message node and its command-line client.
//
// One binary serves the node (ledge serve), administers it (topic, token,
// plugin, group, uplink, state, status) and talks to it as a client
// (produce, consume), and measures it (bench). The serve command turns
// flags and the configuration file (internal/config) into a node.Config
// and runs the node until a signal stops it; every other command is a
// client of a running node through package sdk, found through its data
// directory: the listen file where serve records its addresses, the CA
// certificate and the admin token. The root command makes every command
// strict about its arguments (root.go): an unknown subcommand fails with
// a suggestion, a missing argument is named.
//
// It holds no logic of the node itself: what a command does on the node
// is a request the node serves, so that scripts and programs get the same
// through the SDK.
package main
