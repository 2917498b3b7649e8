package owner

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
)

// Fenced state (docs/FENCING.md, "State"). A consumer — a group, or a
// named consumer — keeps a keyed store per partition beside its committed
// offset. The store is written only by CommitState, which carries the
// token of the poll the state derives from and applies the offset and the
// changes in one write after the checks of Commit: a stale token (a fenced
// member, a stale assignment, a changed history) writes nothing. A load
// returns the entries together with the bookmark they belong to, read in
// one owner step, so the state never runs ahead of or behind its offset.

// Limits of state commits. A commit past any of them is refused with
// ErrStateLimit (an invalid argument) and writes nothing.
const (
	// MaxStateKeySize is the largest key, in bytes. Keys are not empty.
	MaxStateKeySize = 1 << 10
	// MaxStateValueSize is the largest value, in bytes.
	MaxStateValueSize = 1 << 20
	// MaxStateChanges is the most changes (puts and deletes) in one commit.
	MaxStateChanges = 4096
	// MaxStateCommitBytes is the most key and value bytes in one commit,
	// all changes together: a commit fits one protocol frame with room to
	// spare.
	MaxStateCommitBytes = 4 << 20
)

// ErrStateLimit: a state commit exceeds a limit (key size, value size,
// number of changes, total bytes) or has an empty key. Nothing was
// written; the commit can never succeed as it is (give up, or split the
// changes over several commits). It is an ErrInvalidArgument.
var ErrStateLimit = fmt.Errorf("%w: state limit", ErrInvalidArgument)

// StateChange is one change of a consumer's state store: a put of Value
// under Key, or (Delete) the removal of Key. It is the engine's type, so
// that changes reach the store without a copy.
type StateChange = engine.StateChange

// StateEntry is one key of a state store and its value.
type StateEntry struct {
	Key, Value []byte
}

// StateQuery says which entries a load returns.
type StateQuery struct {
	// Key, when non-nil, selects that one key; otherwise every key with
	// Prefix (all keys when Prefix is empty).
	Key    []byte
	Prefix []byte
	// After continues a load: only keys above it are returned.
	After []byte
	// MaxBytes bounds the key and value bytes returned (0: no bound; at
	// least one entry is returned when any is left). More says whether
	// entries were left out.
	MaxBytes int
}

// StateSnapshot is a consumer's state store on a partition together with
// the committed offset it corresponds to, as of one owner step.
type StateSnapshot struct {
	// Committed is the bookmark the entries belong to: the state is the
	// effect of the records before Committed.Offset, in history epoch
	// Committed.History. HasCommitted is false when nothing was committed
	// (then there is no state either).
	Committed    Bookmark
	HasCommitted bool
	// Resolved is the bookmark resolved in the current history: where the
	// consumer resumes. Resolved.Moved says a purge or a lossy recovery
	// happened since the state was committed (Committed.History is then
	// below State.History): the state was derived from a history that is
	// gone, and the application decides whether to keep it or to clear it
	// with its first commit.
	Resolved fence.Resolution
	// Next is where processing resumes so that the state sees every record
	// once: the resolved committed offset, or the log start when there is
	// none (or retention removed what it points at). A consumer that loads
	// state polls from Next explicitly, not "next", which may continue from
	// a delivered position the state does not include.
	Next uint64
	// State is the partition's state.
	State PartitionState
	// Entries are the selected keys in key order.
	Entries []StateEntry
	// More: MaxBytes left entries out; continue with After set to the last
	// key returned.
	More bool
}

// CommitState commits the consumer's offset and the changes to its state
// store in one write, and returns once it is durable: OrderCommitState,
// then the wait for durability.
func (o *Owner) CommitState(ctx context.Context, req CommitRequest, changes []StateChange) error {
	d, err := o.OrderCommitState(ctx, req, changes)
	if err != nil {
		return err
	}
	return d.Wait(ctx)
}

// OrderCommitState is the ordering half of CommitState. The commit is
// checked exactly as OrderCommit checks it (the token must be current, the
// offset within what it delivered and not below the committed offset);
// then the bookmark and the changes, in order (a later change of a key
// wins), are ordered as one write. If the commit is refused, or a change
// breaks a limit (ErrStateLimit), nothing is written.
//
// A commit at the committed offset (a retry) applies its changes again;
// changes derived from the same records are the same puts and deletes, so
// the repeat leaves the same state.
func (o *Owner) OrderCommitState(ctx context.Context, req CommitRequest, changes []StateChange) (Durable, error) {
	if err := checkStateChanges(changes); err != nil {
		return Durable{}, err
	}
	if req.Consumer.kind() == fence.HolderAnonymous {
		return Durable{}, ErrNoConsumer
	}
	return o.orderCommit(ctx, req, false, changes)
}

// checkStateChanges enforces the limits of one commit.
func checkStateChanges(changes []StateChange) error {
	if len(changes) > MaxStateChanges {
		return fmt.Errorf("%w: %d changes in one commit, at most %d", ErrStateLimit, len(changes), MaxStateChanges)
	}
	total := 0
	for i := range changes {
		c := &changes[i]
		switch {
		case len(c.Key) == 0:
			return fmt.Errorf("%w: change %d has an empty key", ErrStateLimit, i)
		case len(c.Key) > MaxStateKeySize:
			return fmt.Errorf("%w: change %d: key of %d bytes, at most %d", ErrStateLimit, i, len(c.Key), MaxStateKeySize)
		case len(c.Value) > MaxStateValueSize:
			return fmt.Errorf("%w: change %d: value of %d bytes, at most %d", ErrStateLimit, i, len(c.Value), MaxStateValueSize)
		case c.Delete && len(c.Value) > 0:
			return fmt.Errorf("%w: change %d deletes its key but carries a value", ErrStateLimit, i)
		}
		total += len(c.Key) + len(c.Value)
	}
	if total > MaxStateCommitBytes {
		return fmt.Errorf("%w: %d bytes of keys and values in one commit, at most %d", ErrStateLimit, total, MaxStateCommitBytes)
	}
	return nil
}

// LoadState returns the consumer's state — the one key, or every key when
// key is nil — with the bookmark it corresponds to, read in one owner step.
// A group member must hold the partition under the epoch it states, a
// named consumer must be the current session (the checks of a poll); a
// stale one gets the fence error and no state.
func (o *Owner) LoadState(ctx context.Context, c Consumer, key []byte) (StateSnapshot, error) {
	return o.LoadStateQuery(ctx, c, StateQuery{Key: key})
}

// LoadStateQuery is LoadState with a query: a prefix, a continuation and a
// bound on the bytes returned.
func (o *Owner) LoadStateQuery(ctx context.Context, c Consumer, q StateQuery) (StateSnapshot, error) {
	if c.kind() == fence.HolderAnonymous {
		return StateSnapshot{}, ErrNoConsumer
	}
	return o.loadState(ctx, c, q, true)
}

// InspectState returns a group's state on the partition for an
// administrator: read-only, from no member, so no membership is checked.
// It is a snapshot of one owner step, like LoadState; a group that never
// committed here has no bookmark and no entries.
func (o *Owner) InspectState(ctx context.Context, group string, q StateQuery) (StateSnapshot, error) {
	if group == "" {
		return StateSnapshot{}, fmt.Errorf("%w: no group named", ErrInvalidArgument)
	}
	return o.loadState(ctx, Consumer{Name: group}, q, false)
}

// loadState reads c's bookmark and state in one owner step; checked runs
// the requester's checks first (a load, not an inspection). The owner's
// lock is held for the scan: a large store is read in pages (MaxBytes).
func (o *Owner) loadState(ctx context.Context, c Consumer, q StateQuery, checked bool) (StateSnapshot, error) {
	if err := ctx.Err(); err != nil {
		return StateSnapshot{}, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.refuseClosed(); err != nil {
		return StateSnapshot{}, err
	}
	p := o.facts()
	var pr *progress
	if checked {
		h := o.holder(c)
		if err := o.checkRequester(c, h); err != nil {
			return StateSnapshot{}, err
		}
		pr = o.progressOf(c)
	} else if pr = o.groups[c.Name]; pr == nil {
		// Not created for an inspection: the owner keeps progress only
		// for groups that polled or committed here.
		pr = &progress{key: GroupBookmarkKey(c.Name)}
	}
	snap := StateSnapshot{State: p}
	res, ok, err := o.resolveCommitted(p, pr)
	if err != nil {
		return StateSnapshot{}, err
	}
	snap.Committed, snap.HasCommitted, snap.Resolved = pr.committed, ok, res
	snap.Next = p.LogStart
	if ok && res.Outcome == fence.ResumeAt {
		snap.Next = res.Offset
	}
	if err := o.scanState(pr.key, q, &snap); err != nil {
		return StateSnapshot{}, err
	}
	return snap, nil
}

// stateSeeker is a log that starts a state scan after a key instead of
// skipping the keys before it (the engine's does): a load in pages then
// reads each key once.
type stateSeeker interface {
	ScanStateFrom(consumer string, prefix, after []byte, fn func(k, v []byte) error) error
}

// errStopScan ends a scan early.
var errStopScan = errors.New("owner: stop scan")

// scanState fills snap.Entries per q. Called with o.mu held: no write of
// the consumer's state or bookmark comes between the bookmark read and the
// scan.
func (o *Owner) scanState(key string, q StateQuery, snap *StateSnapshot) error {
	prefix := q.Prefix
	if q.Key != nil {
		prefix = q.Key
	}
	size := 0
	scan := func(fn func(k, v []byte) error) error { return o.log.ScanState(key, prefix, fn) }
	if s, ok := o.log.(stateSeeker); ok && q.After != nil {
		scan = func(fn func(k, v []byte) error) error { return s.ScanStateFrom(key, prefix, q.After, fn) }
	}
	err := scan(func(k, v []byte) error {
		if q.Key != nil && !bytes.Equal(k, q.Key) {
			return errStopScan
		}
		if q.After != nil && bytes.Compare(k, q.After) <= 0 {
			return nil
		}
		if q.MaxBytes > 0 && len(snap.Entries) > 0 && size+len(k)+len(v) > q.MaxBytes {
			snap.More = true
			return errStopScan
		}
		size += len(k) + len(v)
		snap.Entries = append(snap.Entries, StateEntry{Key: bytes.Clone(k), Value: bytes.Clone(v)})
		return nil
	})
	if errors.Is(err, errStopScan) {
		return nil
	}
	return err
}

// DeleteConsumer removes the group's progress on the partition — its
// committed offset and its whole state store, in one write — and forgets
// what the owner keeps of its progress in memory (delivered position,
// queued commit). Called when the group is deleted (it has no members,
// so no assignment); it is an owner
// step, so a commit of the group is ordered entirely before it (and
// deleted) or after it. The returned Durable says when the deletion is
// durable.
func (o *Owner) DeleteConsumer(ctx context.Context, name string) (Durable, error) {
	if err := ctx.Err(); err != nil {
		return Durable{}, err
	}
	if name == "" {
		return Durable{}, fmt.Errorf("%w: no group named", ErrInvalidArgument)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.refuseClosed(); err != nil {
		return Durable{}, err
	}
	t, err := o.log.DeleteConsumer(GroupBookmarkKey(name))
	if err != nil {
		return Durable{}, err
	}
	delete(o.groups, name)
	return Durable{meta: o.meta, ticket: t}, nil
}
