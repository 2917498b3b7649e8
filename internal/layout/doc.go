// Package layout holds no code: its test checks the module's import rules
// (DESIGN.md, node/doc.go) with go list, as pebble's forbidden-imports
// test does, so that a change that breaks one fails `go test ./...`.
package layout
