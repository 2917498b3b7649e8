//go:build ledgetest

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/internal/fullfs"
)

// testDiskEnv names a control file that puts `ledge serve` on a disk of
// limited size: the node's file system is wrapped in internal/fullfs,
// counting the data directory's files, so that a test without the right
// to mount a small file system can fill the node's disk and free it. It
// is for tests only, and so is left out of --help and of the settings,
// and built only with the ledgetest build tag (go build -tags ledgetest),
// which a release build does not set: a release binary links no test file
// system (testdisk_release.go).
//
// The file holds the disk's size in bytes, or "full" for the bytes in use
// at that moment (no room left). The node reads it at start and whenever
// it changes (it looks every testDiskPoll), and logs each size it takes
// ("test disk resized"), which a test may wait for.
const testDiskEnv = "LEDGE_TEST_DISK"

// testDiskPoll is how often the control file is read.
const testDiskPoll = 10 * time.Millisecond

// testDisk returns the file system the node runs on: vfs.Default, or, when
// the environment names a control file (testDiskEnv), a disk of limited
// size over it, resized until ctx ends.
func testDisk(ctx context.Context, dataDir string, log *slog.Logger) (vfs.FS, error) {
	control, ok := os.LookupEnv(testDiskEnv)
	if !ok || control == "" {
		return vfs.Default, nil
	}
	disk := fullfs.Wrap(vfs.Default, dataDir, 0)
	resize := func(text string) error {
		budget := disk.Used()
		if text != "full" {
			n, err := strconv.ParseInt(text, 10, 64)
			if err != nil || n < 0 {
				return fmt.Errorf("%s: %q is neither a size in bytes nor \"full\"", testDiskEnv, text)
			}
			budget = n
		}
		disk.SetBudget(budget)
		log.Info("test disk resized", "bytes", budget, "used", disk.Used())
		return nil
	}
	read := func() (string, error) {
		b, err := os.ReadFile(control)
		return strings.TrimSpace(string(b)), err
	}
	last, err := read()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", testDiskEnv, err)
	}
	if err := resize(last); err != nil {
		return nil, err
	}
	go func() {
		tick := time.NewTicker(testDiskPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			text, err := read()
			if err != nil || text == "" || text == last {
				continue // unchanged, or being rewritten: read it again next time
			}
			if err := resize(text); err != nil {
				log.Warn("test disk not resized", "err", err)
			}
			last = text
		}
	}()
	return disk, nil
}
