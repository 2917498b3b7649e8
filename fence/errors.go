package fence

import (
	"errors"
	"fmt"
)

// Code is the stable numeric identity of a fence rejection. The values are
// part of the wire protocol: never renumber or reuse one; add new codes at
// the end.
type Code uint8

// Codes of fence rejections. Each has one Action (Code.Action).
const (
	CodeStaleHistory        Code = 1  // the work was created in an older history epoch
	CodeTopicRecreated      Code = 2  // the work was created for an earlier topic of the same name
	CodeFencedProducer      Code = 3  // a newer incarnation of the producer exists
	CodeUnknownProducer     Code = 4  // producer id or epoch not registered on this node
	CodeOutOfOrderSequence  Code = 5  // the batch's sequence leaves a gap
	CodeDuplicateSequence   Code = 6  // already appended long ago; offsets no longer known
	CodeFencedSession       Code = 7  // another process attached under the consumer name
	CodeUnknownSession      Code = 8  // the session epoch was never handed out
	CodeFencedMember        Code = 9  // the member's identity is from another incarnation
	CodeStaleMemberEpoch    Code = 10 // the work predates the member's current assignment of p
	CodeUnknownMember       Code = 11 // the group does not know the member
	CodeUnassignedPartition Code = 12 // the member does not hold the partition
	CodeOffsetOutOfRange    Code = 13 // offset below the log start or past the high watermark
	CodeCommitBackwards     Code = 14 // commit below the committed offset without a reset
	CodeTokenRequired       Code = 15 // the effect needs a fence token and none was given
	CodeTokenMismatch       Code = 16 // the token was issued for another partition or consumer
	CodeNotDelivered        Code = 17 // commit offset outside the range the token delivered
	CodeMalformedToken      Code = 18 // token bytes are not a token of a known version
	CodeUnknownHistory      Code = 19 // epoch absent from the partition's lineage
	codeEnd                 Code = 20 // one past the last code
)

// Action tells a client what to do after a rejection.
type Action uint8

const (
	// Retry: nothing happened; the same request may be sent again (for a
	// producer: resend in sequence order after earlier batches).
	Retry Action = iota + 1
	// RefreshPosition: nothing happened; drop the messages and tokens held
	// for this partition, and poll again from the committed position
	// ("next"). The new poll will succeed.
	RefreshPosition
	// Reinitialize: the client's identity is unknown here (node state was
	// lost or the topic re-created): initialize the producer again, or
	// re-read topic metadata and positions.
	Reinitialize
	// Rejoin: the group member must drop all its partitions and rejoin the
	// group at epoch 0.
	Rejoin
	// GiveUp: the operation can never succeed; do not retry it. For a
	// fenced producer or session, a newer process owns the name.
	GiveUp
)

// String returns the action's name.
func (a Action) String() string {
	switch a {
	case Retry:
		return "retry"
	case RefreshPosition:
		return "refresh-position"
	case Reinitialize:
		return "reinitialize"
	case Rejoin:
		return "rejoin"
	case GiveUp:
		return "give-up"
	}
	return "unknown"
}

type codeInfo struct {
	name   string
	action Action
}

// codeTable is indexed by Code; it is constant data, never written.
var codeTable = [codeEnd]codeInfo{
	CodeStaleHistory:        {"stale history", RefreshPosition},
	CodeTopicRecreated:      {"topic re-created", Reinitialize},
	CodeFencedProducer:      {"fenced producer", GiveUp},
	CodeUnknownProducer:     {"unknown producer", Reinitialize},
	CodeOutOfOrderSequence:  {"out-of-order sequence", Retry},
	CodeDuplicateSequence:   {"duplicate sequence", GiveUp},
	CodeFencedSession:       {"fenced session", GiveUp},
	CodeUnknownSession:      {"unknown session", Reinitialize},
	CodeFencedMember:        {"fenced member", Rejoin},
	CodeStaleMemberEpoch:    {"stale member epoch", RefreshPosition},
	CodeUnknownMember:       {"unknown member", Rejoin},
	CodeUnassignedPartition: {"unassigned partition", GiveUp},
	CodeOffsetOutOfRange:    {"offset out of range", RefreshPosition},
	CodeCommitBackwards:     {"commit backwards", GiveUp},
	CodeTokenRequired:       {"token required", GiveUp},
	CodeTokenMismatch:       {"token mismatch", GiveUp},
	CodeNotDelivered:        {"offset not delivered", GiveUp},
	CodeMalformedToken:      {"malformed token", GiveUp},
	CodeUnknownHistory:      {"unknown history", Reinitialize},
}

// Valid reports whether c is a known code.
func (c Code) Valid() bool { return c > 0 && c < codeEnd }

// String returns the code's name.
func (c Code) String() string {
	if !c.Valid() {
		return fmt.Sprintf("code(%d)", uint8(c))
	}
	return codeTable[c].name
}

// Action returns what a client must do after a rejection with this code.
// Unknown codes (from a newer peer) map to GiveUp.
func (c Code) Action() Action {
	if !c.Valid() {
		return GiveUp
	}
	return codeTable[c].action
}

// Error is a fence rejection. Nothing happened: a rejected effect changed no
// state. Compare with the sentinels using errors.Is; the facts fields, when
// set, describe the partition as the owner saw it, so a client can refresh
// without another round trip.
type Error struct {
	Code   Code
	Action Action
	// Detail says what did not match, for people.
	Detail string
	// History, LogStart and HighWatermark are the partition's state at the
	// rejection when relevant (zero otherwise).
	History       HistoryEpoch
	LogStart      uint64
	HighWatermark uint64
}

// Error implements error.
func (e *Error) Error() string {
	if e.Detail == "" {
		return "fence: " + e.Code.String()
	}
	return "fence: " + e.Code.String() + ": " + e.Detail
}

// Is makes errors.Is(err, ErrX) match every *Error with the code of ErrX.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is. Each is an *Error with its code's action; do not
// modify them.
var (
	ErrStaleHistory        = sentinel(CodeStaleHistory)
	ErrTopicRecreated      = sentinel(CodeTopicRecreated)
	ErrFencedProducer      = sentinel(CodeFencedProducer)
	ErrUnknownProducer     = sentinel(CodeUnknownProducer)
	ErrOutOfOrderSequence  = sentinel(CodeOutOfOrderSequence)
	ErrDuplicateSequence   = sentinel(CodeDuplicateSequence)
	ErrFencedSession       = sentinel(CodeFencedSession)
	ErrUnknownSession      = sentinel(CodeUnknownSession)
	ErrFencedMember        = sentinel(CodeFencedMember)
	ErrStaleMemberEpoch    = sentinel(CodeStaleMemberEpoch)
	ErrUnknownMember       = sentinel(CodeUnknownMember)
	ErrUnassignedPartition = sentinel(CodeUnassignedPartition)
	ErrOffsetOutOfRange    = sentinel(CodeOffsetOutOfRange)
	ErrCommitBackwards     = sentinel(CodeCommitBackwards)
	ErrTokenRequired       = sentinel(CodeTokenRequired)
	ErrTokenMismatch       = sentinel(CodeTokenMismatch)
	ErrNotDelivered        = sentinel(CodeNotDelivered)
	ErrMalformedToken      = sentinel(CodeMalformedToken)
	ErrUnknownHistory      = sentinel(CodeUnknownHistory)
)

func sentinel(c Code) *Error { return &Error{Code: c, Action: c.Action()} }

// FromCode rebuilds a rejection received over the wire.
func FromCode(c Code, detail string) *Error {
	return &Error{Code: c, Action: c.Action(), Detail: detail}
}

// reject builds a rejection carrying the partition's state. Only rejection
// paths call it, so the accepting paths stay allocation-free.
func reject(c Code, p Partition, format string, args ...any) *Error {
	return &Error{
		Code: c, Action: c.Action(), Detail: fmt.Sprintf(format, args...),
		History: p.History, LogStart: p.LogStart, HighWatermark: p.HighWatermark,
	}
}

// ActionOf returns the action of a fence rejection in err's chain, and
// false if err carries none.
func ActionOf(err error) (Action, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Action, true
	}
	return 0, false
}

// CodeOf returns the code of a fence rejection in err's chain, and false if
// err carries none.
func CodeOf(err error) (Code, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	return 0, false
}

// Retryable reports whether err is a fence rejection after which the client
// recovers on its own by sending again: the same request (Retry) or a new
// poll from the committed position (RefreshPosition).
func Retryable(err error) bool {
	a, ok := ActionOf(err)
	return ok && (a == Retry || a == RefreshPosition)
}
