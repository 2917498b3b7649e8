// Package e2e holds end-to-end tests of the Go SDK and the ledge CLI
// against a real node on an ephemeral loopback port. It has no code of its
// own: the SDK must not import the node, so the tests that need both live
// here.
package e2e
