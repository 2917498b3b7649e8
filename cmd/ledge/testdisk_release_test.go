//go:build !ledgetest

package main

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// A release binary has no test disk: naming one is refused, so that a
// test built without the ledgetest tag fails instead of filling the real
// disk.
func TestReleaseBuildRefusesATestDisk(t *testing.T) {
	t.Setenv(testDiskEnv, filepath.Join(t.TempDir(), "size"))
	_, err := testDisk(t.Context(), t.TempDir(), slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "-tags ledgetest") {
		t.Fatalf("testDisk with %s set in a release build: %v, want a refusal naming the build tag", testDiskEnv, err)
	}
	t.Setenv(testDiskEnv, "")
	if fs, err := testDisk(t.Context(), t.TempDir(), slog.New(slog.DiscardHandler)); err != nil || fs == nil {
		t.Fatalf("testDisk without %s: %v, %v", testDiskEnv, fs, err)
	}
}
