package datadir

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestListenFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := Listen{PID: os.Getpid(), QUIC: "127.0.0.1:7420", HTTP: "127.0.0.1:7421", Kafka: "127.0.0.1:9092", Version: "v1", Started: time.Unix(1_700_000_000, 0).UTC()}
	if err := WriteListen(dir, want); err != nil {
		t.Fatal(err)
	}
	got, live, err := ReadListen(dir)
	if err != nil || got != want || !live {
		t.Fatalf("ReadListen = %+v, %v, %v; want %+v, live", got, live, err, want)
	}
	if err := RemoveListen(dir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadListen(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after RemoveListen: %v, want fs.ErrNotExist", err)
	}
	if err := RemoveListen(dir); err != nil {
		t.Fatalf("removing a missing listen file: %v", err)
	}
}

// A listen file left by a process that is gone is stale, whatever it
// says.
func TestListenFileOfAGoneProcessIsStale(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteListen(dir, Listen{PID: cmd.Process.Pid, QUIC: "127.0.0.1:7420"}); err != nil {
		t.Fatal(err)
	}
	if _, live, err := ReadListen(dir); err != nil || live {
		t.Fatalf("ReadListen of a gone process's file: live %v, %v", live, err)
	}
}

func TestReadListenRefusesWhatIsNotOne(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ListenFile), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, live, err := ReadListen(dir); err == nil || live {
		t.Fatalf("ReadListen of garbage: live %v, err %v", live, err)
	}
}

func TestDialAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0:7420":   "127.0.0.1:7420",
		"[::]:7420":      "[::1]:7420",
		":7420":          "127.0.0.1:7420",
		"10.0.0.5:7420":  "10.0.0.5:7420",
		"ledge.lan:7420": "ledge.lan:7420",
		"garbage":        "garbage",
	} {
		if got := DialAddr(in); got != want {
			t.Errorf("DialAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
