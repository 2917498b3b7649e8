package fullfs

import (
	"errors"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestPreallocatedRoomIsKept: room a file preallocated past its size is
// charged when it is taken, so that writing into it succeeds on a disk
// that filled meanwhile (as the metadata store's log relies on), and is
// given back when the file is removed.
func TestPreallocatedRoomIsKept(t *testing.T) {
	dir := t.TempDir()
	fs := Wrap(vfs.Default, dir, 1<<20)
	log, err := fs.Create(fs.PathJoin(dir, "000001.log"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if err := log.Preallocate(0, 64<<10); err != nil {
		t.Fatal(err)
	}
	if got := fs.Used(); got != 64<<10 {
		t.Fatalf("used %d after preallocating 64 KiB", got)
	}
	if err := log.Preallocate(0, 2<<20); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("preallocating past the disk: %v", err)
	}

	fs.Fill(0) // another writer took the rest
	if _, err := log.Write(make([]byte, 64<<10)); err != nil {
		t.Fatalf("writing into preallocated room on a full disk: %v", err)
	}
	if _, err := log.Write([]byte{1}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing past the preallocated room on a full disk: %v", err)
	}

	other, err := fs.Create(fs.PathJoin(dir, "other"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Preallocate(0, 4<<10); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("preallocating on a full disk: %v", err)
	}
	if err := fs.Remove(fs.PathJoin(dir, "000001.log")); err != nil {
		t.Fatal(err)
	}
	if got := fs.Used(); got != 0 {
		t.Fatalf("used %d after removing the only file", got)
	}
}
