package node

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPeersFileListsClientsUntilACleanStop: while a client is connected
// the data directory lists its connection for a successor; a clean stop,
// which closes the connections itself, removes the list.
func TestPeersFileListsClientsUntilACleanStop(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Listen: "127.0.0.1:0", RetentionInterval: -1}
	n, err := Open(safetyContext(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	tn := &testNode{Node: n}
	admin, err := os.ReadFile(n.Paths().AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	c := tn.mustDial(t, strings.TrimSpace(string(admin)))
	local := netip.MustParseAddrPort(c.conn.LocalAddr().String()).Port()
	path := filepath.Join(dir, PeersFile)
	ctx := safetyContext(t)
	for listed := false; !listed; {
		if b, err := os.ReadFile(path); err == nil {
			peers, err := decodePeers(b)
			if err != nil {
				t.Fatalf("the peer list: %v", err)
			}
			for _, p := range peers {
				listed = listed || p.Addr.Port() == local
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("the client's connection was never listed")
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the peer list after a clean stop: %v", err)
	}
}

// TestAGarbledPeersFileIsIgnored: a list torn by a power cut fails its
// checksum; the node starts, resets nobody and removes it.
func TestAGarbledPeersFileIsIgnored(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, PeersFile)
	b := encodePeers(nil)
	b = append(b, 1, 2, 3)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := decodePeers(b); err == nil {
		t.Fatal("a torn list was read")
	}
	n, err := Open(safetyContext(t), Config{DataDir: dir, Listen: "127.0.0.1:0", RetentionInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	for {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return
		}
		select {
		case <-safetyContext(t).Done():
			t.Fatal("the torn list stayed")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
