// Package opstest holds what the tests of node/... share to read the
// node's Prometheus metrics.
//
// It is test support, not API: only _test.go files import it.
package opstest
