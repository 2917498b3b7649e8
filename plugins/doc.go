// Package plugins runs Ledge's WebAssembly plugins: filters, which decide
// which records of a poll a consumer receives, commit policies, which
// propose a consumer's automatic commit, and transforms, which turn a
// batch of records into output records and carry a state from batch to
// batch. It is the host side of the ABI of docs/PLUGINS.md (package abi
// holds the layout; sdk/plugin is the guest kit).
//
// A Host compiles a module once per digest when it is added (Add), never
// on the request path, with wazero and an optional on-disk compilation
// cache. Calls (Filter, Propose, Transform) take an instance from a pool under a
// global memory budget, copy an immutable View of the poll result into it,
// run one call per poll under a deadline, and validate the answer before
// returning it. An instance is used by one goroutine at a time. A trap, a
// timeout or an invalid answer fails the call, discards the instance and
// counts a strike; too many strikes quarantine the plugin until it is
// replaced.
//
// A runaway guest cannot stall the process: every module is rewritten when
// added so that its loops and calls spend fuel and return to the host at
// bounded intervals, where the deadline is checked and the goroutine can
// be preempted. RATIONALE.md explains the choice over wazero's
// WithCloseOnContextDone and over a separate process, with measurements.
//
// The package decides nothing about progress: the node applies a filter's
// bitmap (View.Filtered builds the reply's batches; the consumer's
// position still moves to View.Next) and turns a proposal into a fenced
// commit on the partition owner. A transform call is a function of its
// inputs (the batch, the previous state, the parameters) returning outputs
// and the next state; storing them, with the input position, is the
// caller's. It is not a general WebAssembly runtime:
// only modules speaking the plugin ABI load.
//
// Typical use by the node:
//
//	h, err := plugins.NewHost(ctx, plugins.Config{CacheDir: filepath.Join(dataDir, "plugins-cache")})
//	digest, err := h.Add(ctx, "site", plugins.KindFilter, wasm)
//	...
//	v, err := plugins.NewView(plugins.PollResult{Topic: t, Partition: p, From: from, Next: res.Next, Batches: res.Batches})
//	keep, err := h.Filter(ctx, "site", plugins.Params{"field": "site", "equals": "lyon"}, v)
//	batches, err := v.Filtered(keep, record.CompressionNone, maxBatchBytes)
//	// reply: batches, next position v.Next()
package plugins
