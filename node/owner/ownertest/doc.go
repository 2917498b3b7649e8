// Package ownertest holds what the tests of node/... share to drive a
// partition owner without the storage engine: an in-memory Metadata (Meta)
// and PartitionLog (Log) whose durability, reads and failures a test
// controls, and helpers that build batches and render poll results.
//
// It is test support, not API: only _test.go files import it.
package ownertest
