//go:build !ledgetest

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// testDiskEnv names the control file of a test disk (testdisk.go), which
// only a binary built with the ledgetest tag has.
const testDiskEnv = "LEDGE_TEST_DISK"

// testDisk returns vfs.Default. A test that names a test disk from a
// release binary is refused rather than run on the real disk.
func testDisk(_ context.Context, _ string, _ *slog.Logger) (vfs.FS, error) {
	if control, ok := os.LookupEnv(testDiskEnv); ok && control != "" {
		return nil, fmt.Errorf("%s is set, but this binary has no test disk: build it with -tags ledgetest", testDiskEnv)
	}
	return vfs.Default, nil
}
