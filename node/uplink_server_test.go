package node

import (
	"context"
	"testing"

	"github.com/ledgemq/ledge/node/owner/ownertest"
)

// TestNodeIDIsStable: the node id is created once and read back after a
// restart, so transactional ids survive restarts (and backups).
func TestNodeIDIsStable(t *testing.T) {
	m := ownertest.NewMeta()
	id, err := LoadOrCreateNodeID(context.Background(), m)
	if err != nil || id == "" {
		t.Fatalf("id %q: %v", id, err)
	}
	again, err := LoadOrCreateNodeID(context.Background(), m.Restart())
	if err != nil || again != id {
		t.Fatalf("after a restart: %q (%v), want %q", again, err, id)
	}
}
