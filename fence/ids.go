package fence

import "encoding/hex"

// TopicID identifies one creation of a topic. It is random, chosen when the
// topic is created, so a topic deleted and re-created under the same name is
// a different topic everywhere: files, metadata keys and tokens.
type TopicID [16]byte

// String returns the id as 32 lowercase hex digits.
func (id TopicID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the zero id, which no topic ever has.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// HistoryEpoch numbers the histories of one partition. It starts at 1 when
// the partition is created and increases by one at every purge and at every
// recovery that lost records a reader could have seen. Retention does not
// change it: it only raises the log start offset.
type HistoryEpoch uint64

// ProducerID identifies an idempotent producer node-wide. Zero means "no
// producer": the batch is appended without sequence checks.
type ProducerID uint64

// ProducerEpoch numbers the incarnations of one producer id. Initializing a
// producer under an existing id bumps its epoch, which fences every older
// incarnation (a zombie producer).
type ProducerEpoch uint32

// SessionEpoch numbers the processes that attached under one named
// consumer. Attaching bumps it, which fences the polls and commits of every
// earlier process under that name. Zero means no process ever attached.
type SessionEpoch uint64

// GroupEpoch is a consumer group's single monotonic epoch. It increases
// whenever the group's target assignment changes.
type GroupEpoch uint64

// MemberEpoch is the group epoch of the assignment a member last reconciled.
// A member's assignment epoch for a partition p is the member epoch at which
// it received p; regaining p after losing it yields a new, higher one.
type MemberEpoch uint64

// TransitionKind says how a history epoch began.
type TransitionKind uint8

const (
	// TransitionCreate: the partition was created; the first epoch.
	TransitionCreate TransitionKind = iota + 1
	// TransitionPurge: every record below Start was removed on purpose.
	// Numbering continues: Start is the high watermark at the purge.
	TransitionPurge
	// TransitionLossyRecovery: recovery found the log ending below offsets
	// that had been handed out. Records below KeptEnd survived; the lost
	// ones in [KeptEnd, Start) are never reused, numbering resumes at Start.
	TransitionLossyRecovery
)

// String returns the kind's lowercase name.
func (k TransitionKind) String() string {
	switch k {
	case TransitionCreate:
		return "create"
	case TransitionPurge:
		return "purge"
	case TransitionLossyRecovery:
		return "lossy-recovery"
	}
	return "unknown"
}

// HistoryTransition records how one history epoch of a partition began. A
// partition's lineage is its transitions in increasing epoch order; it is
// what lets a bookmark from an older history be resolved (ResolveBookmark).
type HistoryTransition struct {
	// Epoch is the history epoch that began.
	Epoch HistoryEpoch
	// Start is the first offset of the new epoch: the new log start offset
	// after a purge, the first offset handed out after a lossy recovery.
	Start uint64
	// Kind says what began the epoch.
	Kind TransitionKind
	// KeptEnd, for a lossy recovery, is the exclusive end of the records of
	// the previous epoch that survived. Unused for other kinds.
	KeptEnd uint64
}

// NameHash maps a consumer, group or member name to the 64-bit value a
// token carries (FNV-1a). Tokens stay fixed-size by carrying hashes; the
// owner compares them with the hash of the name in the request, so a token
// issued to one name is refused for another.
func NameHash(name string) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= prime64
	}
	return h
}
