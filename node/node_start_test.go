package node

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenDataDirInUse: a second Open on a data directory a node holds
// fails with ErrDataDirInUse naming the holder, and leaves nothing open:
// once the first node is closed the directory opens again.
func TestOpenDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	first, err := Open(safetyContext(t), Config{DataDir: dir, Listen: "127.0.0.1:0", RetentionInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(safetyContext(t), Config{DataDir: dir, Listen: "127.0.0.1:0", RetentionInterval: -1})
	if !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("second Open: %v, want ErrDataDirInUse", err)
	}
	if want := fmt.Sprintf("pid %d", os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("second Open: %q does not say %q", err, want)
	}
	if err := first.Close(safetyContext(t)); err != nil {
		t.Fatal(err)
	}
	again, err := Open(safetyContext(t), Config{DataDir: dir, Listen: "127.0.0.1:0", RetentionInterval: -1})
	if err != nil {
		t.Fatalf("Open after the holder closed: %v", err)
	}
	_ = again.Close(safetyContext(t))
}

// TestOpenQUICAddressInUse: Open on a UDP address already bound fails
// saying so, after it had opened the storage, the plugins and the
// uplinks: all of it is closed again, so the directory opens at once on
// another address.
func TestOpenQUICAddressInUse(t *testing.T) {
	taken, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	_, err = Open(safetyContext(t), Config{DataDir: dir, Listen: taken.LocalAddr().String(), RetentionInterval: -1})
	if err == nil || !strings.Contains(err.Error(), "already in use") || !strings.Contains(err.Error(), taken.LocalAddr().String()) {
		t.Fatalf("Open on a taken address: %v", err)
	}
	n, err := Open(safetyContext(t), Config{DataDir: dir, Listen: "127.0.0.1:0", RetentionInterval: -1})
	if err != nil {
		t.Fatalf("Open after a failed start: %v", err)
	}
	_ = n.Close(safetyContext(t))
}

// TestOpenReadOnlyDataDir: an existing data directory on a read-only
// mount is refused as not writable. It needs root to mount.
func TestOpenReadOnlyDataDir(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(safetyContext(t), Config{DataDir: dir, Listen: "127.0.0.1:0", RetentionInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	_ = n.Close(safetyContext(t))
	ro := readOnlyView(t, dir)
	_, err = Open(safetyContext(t), Config{DataDir: ro, Listen: "127.0.0.1:0", RetentionInterval: -1})
	if err == nil || !strings.Contains(err.Error(), "not writable") {
		t.Fatalf("Open on a read-only directory: %v", err)
	}
}

// readOnlyView bind-mounts dir read-only and returns the mount point; the
// test is skipped where it cannot mount.
func readOnlyView(t *testing.T, dir string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a read-only view needs root")
	}
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "--bind", dir, ro).CombinedOutput(); err != nil {
		t.Skipf("cannot bind-mount: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", ro).Run() })
	if out, err := exec.Command("mount", "-o", "remount,ro,bind", ro).CombinedOutput(); err != nil {
		t.Skipf("cannot remount read-only: %v %s", err, out)
	}
	return ro
}

// TestResetKeyKeptAcrossRestarts: the node secret is created on first
// start, readable by its owner alone, and gives the same stateless reset
// key at every start (what lets a restarted node reset old connections).
func TestResetKeyKeptAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	first, err := loadResetKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", SecretFile, fi.Mode().Perm())
	}
	second, err := loadResetKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if *first != *second {
		t.Error("the reset key changed across starts")
	}
	other, err := loadResetKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if *other == *first {
		t.Error("two data directories share a reset key")
	}
}
