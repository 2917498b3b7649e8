// Package abi is version 1 of the Ledge plugin ABI: the layout of the input
// region a host copies into a plugin's memory, the parameter encoding, the
// answers a plugin gives, and the names of the exports and imports that
// connect the two.
//
// Both sides use it: the host (package plugins) encodes poll results with
// Encoder and reads answers (ParseBitmap, ParseProposal,
// ParseTransformAnswer); the guest kit (package sdk/plugin) reads the
// region in place with View and Record, without allocating per record,
// and writes a transform's answer with OutputEncoder.
// Native Go helpers that the host offers to guests (JSON field lookup,
// byte search) live here too, so a guest's in-process tests see the very
// code the host runs.
//
// The package is pure Go with no dependencies beyond the standard library,
// so that a guest built for GOOS=wasip1 pulls in nothing else. It is not for
// running plugins: see package plugins. docs/PLUGINS.md is the
// language-neutral specification; this package is its reference encoding.
package abi
