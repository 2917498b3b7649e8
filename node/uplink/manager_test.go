package uplink

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/node/uplink/uplinktest"
)

// TestUplinksAddRunRemove: an uplink added through the manager is
// persisted, forwards every partition, reports per-partition status, holds
// retention under block, and is forgotten by Remove; a manager started on
// the same metadata starts only uplinks whose topic id is unchanged.
func TestUplinksAddRunRemove(t *testing.T) {
	w := newUplinkWorld(t, 2)
	w.produce(0, 40)
	w.produce(1, 25)
	meta := ownertest.NewMeta()

	var caughtUp sync.WaitGroup
	caughtUp.Add(2)
	srcs := make([]Source, 2)
	for p := range 2 {
		hw := w.owners[p].State().HighWatermark
		var once sync.Once
		srcs[p] = pollHook{Source: w.owners[p], before: func(req owner.PollRequest) {
			if req.Offset >= hw {
				once.Do(caughtUp.Done)
			}
		}}
	}
	partitions := func(topic string) (fence.TopicID, []Source, error) {
		if topic != "events" {
			return fence.TopicID{}, nil, errors.New("unknown topic")
		}
		return w.topic, srcs, nil
	}
	template := Config{
		KafkaOpts: uplinktest.FastKafka(), PollWait: time.Millisecond, StepTimeout: time.Second,
		Wait: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	}
	u := NewManager(ManagerConfig{NodeID: "edge-1", Meta: meta, Partitions: partitions, Template: template})
	ctx := context.Background()
	spec := Spec{Topic: "events", Seeds: w.kafka.ListenAddrs(), To: uplinktest.Topic}
	if err := u.Add(ctx, spec); err != nil {
		t.Fatal(err)
	}
	caughtUp.Wait()
	info, err := u.Status("events")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Partitions) != 2 || info.Spec.TopicID != w.topic {
		t.Fatalf("status %+v", info)
	}
	if floor, ok := u.RetentionFloor(w.topic, 1); !ok || floor != 25 {
		t.Fatalf("retention floor of partition 1: %d %v, want 25", floor, ok)
	}
	u.Close()
	got, _ := w.readCommitted()
	w.checkExactlyOnce(got)

	specs, err := LoadSpecs(meta)
	if err != nil || len(specs) != 1 || specs[0].To != uplinktest.Topic {
		t.Fatalf("persisted specs %+v, %v", specs, err)
	}

	// A node restarted after the topic was re-created does not start the
	// old topic's uplink.
	recreated := NewManager(ManagerConfig{NodeID: "edge-1", Meta: meta, Template: template,
		Partitions: func(string) (fence.TopicID, []Source, error) { return fence.TopicID{9}, srcs, nil }})
	if err := recreated.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if l := recreated.List(); len(l) != 0 {
		t.Fatalf("started the uplink of a re-created topic: %+v", l)
	}

	again := NewManager(ManagerConfig{NodeID: "edge-1", Meta: meta, Partitions: partitions, Template: template})
	if err := again.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := again.Remove(ctx, "events"); err != nil {
		t.Fatal(err)
	}
	if specs, _ := LoadSpecs(meta); len(specs) != 0 {
		t.Fatalf("removed uplink still persisted: %+v", specs)
	}
	if err := again.Remove(ctx, "events"); !errors.Is(err, ErrNoUplink) {
		t.Fatalf("second remove: %v", err)
	}
}

// TestUplinkSpecValidate refuses what cannot work.
func TestUplinkSpecValidate(t *testing.T) {
	ok := Spec{Topic: "t", Seeds: []string{"k:9092"}, To: "central"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]Spec{
		"no seeds":  {Topic: "t", To: "central"},
		"bad seed":  {Topic: "t", Seeds: []string{"k"}, To: "central"},
		"no target": {Topic: "t", Seeds: []string{"k:9092"}},
		"sasl":      {Topic: "t", Seeds: []string{"k:9092"}, To: "c", SASL: &SASL{Mechanism: "GSSAPI"}},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}
