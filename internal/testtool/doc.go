// Package testtool finds the outside programs some tests drive (wat2wasm,
// Chromium, kcat, node) and decides what a missing one means.
//
// On a developer's machine a missing tool skips the test that needs it, with
// the package to install. Under CI (the CI environment variable set, as
// .ci/run runs), a missing tool fails the test: CI installs every tool, so a
// missing one is a broken install, and a skipped test would hide it.
package testtool
