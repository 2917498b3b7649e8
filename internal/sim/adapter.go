package sim

import (
	"fmt"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/node/owner"
)

// The engine as the owner sees it: the node's own adapters (a
// owner.EngineLog per partition and the node's metadata space), wired as
// the node wires them. The log also reports every bookmark the owner
// writes, so that the model learns the commit order without re-deriving
// the owner's decisions, and checks the write against the partition's
// state at that moment.

// ownerLog is the node's engine adapter with its bookmark writes observed.
type ownerLog struct {
	owner.EngineLog
	p   *engine.Partition
	obs bookmarkObserver
}

// bookmarkObserver learns of every bookmark write the owner orders.
type bookmarkObserver interface {
	bookmarkWritten(key string, b owner.Bookmark, st engine.PartitionState, err error)
}

var _ owner.PartitionLog = (*ownerLog)(nil)

// SetBookmark writes the bookmark as the node does and reports it.
func (l *ownerLog) SetBookmark(consumer string, b owner.Bookmark) (owner.Ticket, error) {
	st := l.p.State()
	t, err := l.EngineLog.SetBookmark(consumer, b)
	if l.obs != nil {
		l.obs.bookmarkWritten(consumer, b, st, err)
	}
	return t, err
}

// SetBookmarkState writes the bookmark and the state changes as the node
// does (one batch) and reports the bookmark as SetBookmark does.
func (l *ownerLog) SetBookmarkState(consumer string, b owner.Bookmark, changes []owner.StateChange) (owner.Ticket, error) {
	st := l.p.State()
	t, err := l.EngineLog.SetBookmarkState(consumer, b, changes)
	if l.obs != nil {
		l.obs.bookmarkWritten(consumer, b, st, err)
	}
	return t, err
}

// newOwner builds the owner of partition i of t, as the node does.
func newOwner(t *engine.Topic, i int, meta owner.Metadata, members owner.Members, obs bookmarkObserver) (*owner.Owner, *ownerLog, error) {
	p, err := t.Partition(i)
	if err != nil {
		return nil, nil, err
	}
	l := &ownerLog{EngineLog: owner.NewEngineLog(p), p: p, obs: obs}
	o, err := owner.NewOwner(owner.OwnerConfig{Topic: t.ID(), Partition: uint32(i), Log: l, Meta: meta, Members: members})
	if err != nil {
		return nil, nil, fmt.Errorf("sim: owner of %s/%d: %w", t.Name(), i, err)
	}
	return o, l, nil
}
