package node

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/node/session"
	"github.com/ledgemq/ledge/transport/wire"
)

// TestNodeRetentionHoldIsLogged: the node says once when a floor starts
// holding retention back and once when it stops, not at every
// enforcement.
func TestNodeRetentionHoldIsLogged(t *testing.T) {
	l := ownertest.NewLog(ownertest.NewMeta(), "p0")
	for i := 0; i < 4; i++ {
		if _, _, err := l.Append(ownertest.Batch(t, "a", "b")); err != nil {
			t.Fatal(err)
		}
	}
	l.SetRetentionWant(8)
	var floor ownertest.Floor
	floor.Move(0, true)
	o, err := owner.NewOwner(owner.OwnerConfig{Log: l, Meta: ownertest.NewMeta(), RetentionFloor: floor.Get})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	tp := session.NewTopic(context.Background(), "t", fence.TopicID{}, wire.TopicConfig{})
	defer tp.Delete()
	tp.AddPartition(l, o)
	n := &Node{
		cfg:    Config{Now: func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }},
		log:    slog.New(slog.NewTextHandler(&out, nil)),
		topics: map[string]*topic{"t": tp},
	}
	n.EnforceRetention()
	n.EnforceRetention()
	if got := strings.Count(out.String(), "retention held back"); got != 1 {
		t.Fatalf("%d lines say retention is held back, want 1:\n%s", got, out.String())
	}
	if h := o.RetentionHold(); !h.Held || h.Times != 2 {
		t.Fatalf("hold %+v", h)
	}
	floor.Move(8, true)
	n.EnforceRetention()
	n.EnforceRetention()
	if got := strings.Count(out.String(), "no longer held back"); got != 1 {
		t.Fatalf("%d lines say retention resumed, want 1:\n%s", got, out.String())
	}
	if st := o.State(); st.LogStart != 8 {
		t.Fatalf("log start %d after the floor rose, want 8", st.LogStart)
	}
}
