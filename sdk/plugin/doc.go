// Package plugin is the kit for writing Ledge plugins in Go.
//
// A plugin is a WebAssembly module the node runs in a sandbox over poll
// results: a filter decides which records a consumer receives, a commit
// policy decides what a consumer's automatic commit should be, a
// transform (RegisterTransform) outputs zero or more records per input
// and keeps a State between batches. Write plain Go, register what the
// plugin does from an init function, and build with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o myfilter.wasm .
//
// For example, a record filter keeping readings above a threshold:
//
//	package main
//
//	import "github.com/ledgemq/ledge/sdk/plugin"
//
//	func init() {
//		plugin.RegisterRecordFilter(func(p plugin.Params) (plugin.RecordFilter, error) {
//			min, err := p.Float("min", 0)
//			if err != nil {
//				return nil, err
//			}
//			return func(r plugin.Record) bool {
//				raw, ok := plugin.JSONField(r.Value(), "temp")
//				return ok && parse(raw) > min
//			}, nil
//		})
//	}
//
//	func main() {}
//
// The kit implements the ABI of docs/PLUGINS.md (version 1) with
// //go:wasmexport functions: the setup function runs once per instance
// with the consumer's parameters; the filter or policy then runs once per
// poll result. Records are read in place from the input the host copied
// into the plugin's memory (Record's methods return subslices, no
// allocation per record); copy what must outlive the call.
//
// Native helpers (NativeJSONField, NativeMatchJSON, NativeIndex,
// NativeMatchContains) run in the host, outside the sandbox's metered
// code, and are the fast path for scanning bytes. JSONField does the same
// lookup inside the plugin.
//
// The same code builds natively, so a plugin's own go test can exercise it
// without WebAssembly: RunFilter, RunCommitPolicy and RunTransform drive
// the registered functions through the very encoding the host uses, and
// the native helpers are plain Go.
//
// The kit imports nothing but the standard library and plugins/abi, so
// `ledge plugin init` carries it: Source returns this package's files and
// assemblyscript/ledge.ts, the same kit for AssemblyScript, which init
// writes beside a new project so that it builds offline.
//
// Registration is package state set from init functions, the one place in
// Ledge where that is the design: a WebAssembly reactor has no main to
// call.
package plugin
