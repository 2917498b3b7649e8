package owner

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/ledgemq/ledge/fence"
)

// Consumer says on whose behalf a poll, commit or reset is made.
//
//   - Anonymous: Name and Member empty. It may poll by explicit position;
//     it has no progress, so it cannot commit or poll "next".
//   - Named consumer: Name set, Member empty. Session is the epoch the
//     process got from Sessions.Attach (0 if it never attached).
//   - Group member: Name is the group, Member the member id, MemberEpoch
//     the member's epoch as the request states it.
type Consumer struct {
	Name        string
	Session     fence.SessionEpoch
	Member      string
	MemberEpoch fence.MemberEpoch
}

func (c Consumer) kind() fence.HolderKind {
	switch {
	case c.Name == "":
		return fence.HolderAnonymous
	case c.Member != "":
		return fence.HolderMember
	}
	return fence.HolderConsumer
}

// Sessions hands out the session epochs of named consumers, node-wide: a
// named consumer is one process, whatever topics and partitions it reads,
// and its one session epoch goes with every request it makes (a poll or a
// commit may span topics). Attaching under a name fences every earlier
// process under it, on every topic at once: their polls, commits and
// resets are refused with fence.ErrFencedSession.
type Sessions struct {
	meta Metadata

	attachMu sync.Mutex // serializes Attach across its sync

	mu      sync.RWMutex
	current map[string]fence.SessionEpoch
}

// keySessions prefixes the session keys. The zero topic id in it is a
// remnant of a per-topic layout, kept so that stored epochs stay where
// they are (an epoch lost on upgrade would be handed out again).
const keySessions = "sessions/\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00/"

// OpenSessions loads the session epochs from meta.
func OpenSessions(meta Metadata) (*Sessions, error) {
	s := &Sessions{meta: meta, current: map[string]fence.SessionEpoch{}}
	prefix := []byte(keySessions)
	err := meta.Scan(prefix, func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("owner: session of %q: %d bytes", k[len(prefix):], len(v))
		}
		s.current[string(k[len(prefix):])] = fence.SessionEpoch(binary.BigEndian.Uint64(v))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Sessions) key(name string) []byte {
	k := make([]byte, 0, len(keySessions)+len(name))
	k = append(k, keySessions...)
	return append(k, name...)
}

// Attach starts a new session under the consumer name and returns its
// epoch once it is durable; every earlier session under the name is fenced
// from then on. Epochs never repeat, not even across a crash.
func (s *Sessions) Attach(ctx context.Context, name string) (fence.SessionEpoch, error) {
	if name == "" {
		return 0, fmt.Errorf("owner: attach: empty consumer name")
	}
	s.attachMu.Lock()
	defer s.attachMu.Unlock()
	e := s.Current(name) + 1
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(e))
	t, err := s.meta.Put(s.key(name), v[:])
	if err != nil {
		return 0, err
	}
	if err := s.meta.Sync(ctx, t); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.current[name] = e
	s.mu.Unlock()
	return e, nil
}

// Current returns the name's current session epoch (0: never attached).
func (s *Sessions) Current(name string) fence.SessionEpoch {
	s.mu.RLock()
	e := s.current[name]
	s.mu.RUnlock()
	return e
}

// Members is what the group coordinator tells owners about a member: whether
// the group knows it now, and its current member epoch.
type Members interface {
	Member(group, member string) (known bool, epoch fence.MemberEpoch)
}

// progress is what the owner keeps for one consumer (a name, or a group)
// on its partition.
type progress struct {
	// key is the consumer's bookmark key in the log ("c/name", "g/group").
	key string
	// delivered is the token of the latest validated delivery: what "next"
	// continues from while it is current, and what a commit-on-next-poll
	// commits.
	delivered fence.Token
	// committed caches the stored bookmark (loaded once; the owner is its
	// only writer).
	committed    Bookmark
	hasCommitted bool
	loaded       bool
}

// assignment is a group's current assignment of the owner's partition.
type assignment struct {
	member          string
	assignmentEpoch fence.MemberEpoch
}

// GroupBookmarkKey is the bookmark under which a partition's owner keeps
// a group's committed offset (the owner's progress key of a group).
func GroupBookmarkKey(group string) string { return "g/" + group }

// consumerBookmarkKey is the key of a named consumer's bookmark.
func consumerBookmarkKey(name string) string { return "c/" + name }
