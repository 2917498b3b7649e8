package node

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/internal/syncbuf"
	"github.com/ledgemq/ledge/transport/wire"
)

// A node on the storage engine logs a topic's creation and its deletion
// once each.
func TestTopicCreatedAndDeletedLoggedOnce(t *testing.T) {
	var buf syncbuf.Buffer
	tn := startNode(t, nil, func(cfg *Config) { cfg.Logger = slog.New(slog.NewTextHandler(&buf, nil)) })
	ctx := safetyContext(t)
	info, err := tn.CreateTopic(ctx, "orders", wire.TopicConfig{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := tn.DeleteTopic(ctx, "orders", info.ID); err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{`msg="topic created"`, `msg="topic deleted"`} {
		if n := strings.Count(buf.String(), msg); n != 1 {
			t.Errorf("%s logged %d times:\n%s", msg, n, buf.String())
		}
	}
}
