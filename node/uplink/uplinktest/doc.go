// Package uplinktest holds what the tests of node/... share to watch an
// uplink at work: a kfake Kafka cluster whose connections a test can cut,
// read back with read-committed isolation, and a client that gives up
// quickly.
//
// It is test support, not API: only _test.go files import it.
package uplinktest
