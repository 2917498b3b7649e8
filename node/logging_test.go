package node

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/internal/syncbuf"
	"github.com/ledgemq/ledge/transport/wire"
)

func TestLogRecoveredOneLinePerPartition(t *testing.T) {
	store := newMemStorage()
	var buf syncbuf.Buffer
	tn := startNode(t, store, func(cfg *Config) { cfg.Logger = slog.New(slog.NewTextHandler(&buf, nil)) })
	c := tn.mustDial(t, tn.admin)
	c.createTopic("orders", wire.TopicConfig{Partitions: 2})
	if _, err := c.produce(c.main, "orders", 1, batch(t, 0, 0, 0, "a", "b")); err != nil {
		t.Fatal(err)
	}
	p := store.topic("orders").Partitions[0].(*memPartition)
	p.SetFailed(errors.New("corrupt segment"))

	buf.Reset()
	tn.logRecovered()
	var lines []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "msg=\"partition ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "partition=0") || !strings.Contains(lines[0], "corrupt segment") {
		t.Errorf("failed partition: %s", lines[0])
	}
	if !strings.Contains(lines[1], "level=INFO") || !strings.Contains(lines[1], "high_watermark=2") || !strings.Contains(lines[1], "history_epoch=1") {
		t.Errorf("served partition: %s", lines[1])
	}
}
