package sim

import (
	"fmt"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
)

// The node's other counters live in the same metadata store as the
// bookmarks: consumer session epochs and producer ids and epochs. Each is
// persisted and synced before it is handed out, so none may repeat, not
// even across a power loss. The model remembers every value handed out.

// counters is what the model knows of them.
type counters struct {
	sessions  map[string]fence.SessionEpoch            // highest epoch handed out per name
	producers map[fence.ProducerID]fence.ProducerEpoch // highest epoch per id

	// The registries of the running process.
	sess *owner.Sessions
	prod *owner.Producers
}

func newCounters() *counters {
	return &counters{sessions: map[string]fence.SessionEpoch{}, producers: map[fence.ProducerID]fence.ProducerEpoch{}}
}

// openRegistries loads the registries from the metadata store, as a node
// does at start.
func (w *World) openRegistries() error {
	var err error
	if w.counters.sess, err = owner.OpenSessions(w.meta); err != nil {
		return fmt.Errorf("sim: open sessions: %w", err)
	}
	if w.counters.prod, err = owner.OpenProducers(w.meta); err != nil {
		return fmt.Errorf("sim: open producers: %w", err)
	}
	return nil
}

// attachOp attaches a consumer session under a name.
type attachOp struct{ name string }

func (o attachOp) String() string { return "attach session " + o.name }

func (o attachOp) Run(w *World) (string, error) {
	c := w.counters
	e, err := c.sess.Attach(w.Ctx, o.name)
	if err != nil {
		w.noteErr(err)
		return "failed: " + errClass(err), nil
	}
	if prev, ok := c.sessions[o.name]; ok && e <= prev {
		w.violate("session epoch %d of %q handed out again (had %d)", e, o.name, prev)
	}
	c.sessions[o.name] = max(c.sessions[o.name], e)
	return fmt.Sprintf("epoch %d", e), nil
}

// initProducerOp initializes a producer under a name.
type initProducerOp struct{ name string }

func (o initProducerOp) String() string { return "init producer " + o.name }

func (o initProducerOp) Run(w *World) (string, error) {
	c := w.counters
	id, err := c.prod.Init(w.Ctx, o.name)
	if err != nil {
		w.noteErr(err)
		return "failed: " + errClass(err), nil
	}
	// An id never seen may still be below one seen: an Init that failed
	// may have allocated it durably. No (id, epoch) is handed out twice.
	if prev, ok := c.producers[id.ID]; ok && id.Epoch <= prev {
		w.violate("producer %d epoch %d handed out again (had %d)", id.ID, id.Epoch, prev)
	}
	c.producers[id.ID] = max(c.producers[id.ID], id.Epoch)
	return fmt.Sprintf("id %d epoch %d", id.ID, id.Epoch), nil
}

func countersGenerator() Generator {
	return Generator{Name: "counters", Weight: constant(3), Next: func(w *World) Op {
		name := pick(w, []string{"p", "q"})
		if w.Rng.IntN(2) == 0 {
			return attachOp{name}
		}
		return initProducerOp{name}
	}}
}
