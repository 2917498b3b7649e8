// Package e2e holds end-to-end tests of the Go SDK and the ledge CLI
// against a real node on an ephemeral loopback port. It has no code of its
// own: the SDK must not import the node, so the tests that need both live
// here.
//
// TestDeploymentDay drives the real binary through a deployment's day
// (restarts by SIGTERM and SIGKILL, clients that vanish, producers, a
// group with state, a follower) and reports its restart, resume and
// shutdown times; -day.duration makes it longer:
//
//	go test ./internal/e2e -run TestDeploymentDay -v -day.duration 30m
//
// TestShutdownWhateverTheClients, TestRestartResume and
// TestRestartWithPlugins report the stop and restart figures of
// docs/OPERATIONS.md (-lifecycle.runs 5 for medians).
package e2e
