package wire

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Status is the outcome of a request. Every reply carries one (a poll, a
// commit or a partition-state reply also carries one per partition). The
// numbers are part of the protocol: never renumber or reuse one.
//
// Ranges: 0x0001–0x00FF are general, authentication and data statuses;
// 0x0100–0x01FF are fence rejections, whose low byte is the fence code the
// node rejected the work with; 0x0200–0x02FF are reserved for groups,
// state and plugins, of which 0x0201–0x021F are a filter plugin's
// failures (IsPlugin). A status this package does not know (from a newer
// peer) has the retry class ClassGiveUp.
//
// Status implements error so that errors.Is(err, StatusBusy) matches any
// *Error with that status. StatusOK is not an error: never return it as one.
type Status uint16

// Statuses.
const (
	StatusOK Status = 0x0000

	// StatusMalformedRequest: the body does not decode (truncated, trailing
	// bytes, an unknown enum value, a count larger than the bytes left).
	StatusMalformedRequest Status = 0x0001
	// StatusUnsupportedVersion: the frame's protocol version is not one the
	// peer speaks; the reply frame carries the version it does speak.
	StatusUnsupportedVersion Status = 0x0002
	// StatusUnknownKind: the frame's kind is not a request this peer knows
	// (or one reserved for a later version).
	StatusUnknownKind Status = 0x0003
	// StatusMessageTooLarge: a frame, batch or field exceeds its limit.
	StatusMessageTooLarge Status = 0x0004
	// StatusInvalidArgument: the request decodes but a value is invalid
	// (zero partitions, a bad topic name, a position mode the request
	// cannot use).
	StatusInvalidArgument Status = 0x0005
	// StatusInternal: the node failed in a way it did not expect.
	StatusInternal Status = 0x0006
	// StatusBusy: the node is at a bound (requests or bytes in flight,
	// parked polls, its memory) or past its CPU, and sheds load: nothing
	// happened. A client that announced AuthReadsRetryAfter gets the time
	// to wait before sending again (Error.RetryAfter).
	StatusBusy Status = 0x0007
	// StatusTimeout: the node gave up waiting (for durability, for a reader)
	// before the work was known to be done. A produce that timed out may
	// or may not have been appended; an idempotent producer's retry is safe.
	StatusTimeout Status = 0x0008
	// StatusShuttingDown: the node is draining; reconnect and retry.
	StatusShuttingDown Status = 0x0009

	// StatusUnauthenticated: no successful Authenticate on this connection,
	// or the token is unknown, expired or revoked.
	StatusUnauthenticated Status = 0x0010
	// StatusForbidden: the token lacks the scope the request needs on the
	// topic it names.
	StatusForbidden Status = 0x0011
	// StatusUnknownToken: a token id given to RevokeToken does not exist.
	StatusUnknownToken Status = 0x0012

	// StatusUnknownTopic: no topic of that name (or of that topic id).
	StatusUnknownTopic Status = 0x0020
	// StatusTopicExists: CreateTopic named an existing topic.
	StatusTopicExists Status = 0x0021
	// StatusUnknownPartition: the partition index is not below the topic's
	// partition count.
	StatusUnknownPartition Status = 0x0022
	// StatusNotEnoughSpace: the disk is full (ENOSPC); the append was
	// refused and nothing was written. Reads go on.
	StatusNotEnoughSpace Status = 0x0023
	// StatusPartitionFailed: the partition refuses appends until the node
	// has reopened it (after a failed fsync, or a corrupt durable log).
	StatusPartitionFailed Status = 0x0024
	// StatusInvalidBatch: the record batch failed validation (magic,
	// version, length, CRC, record count).
	StatusInvalidBatch Status = 0x0025

	// Fence rejections: nothing happened, no state changed.

	// StatusStaleHistory: the work was created in an older history epoch
	// of the partition (before a purge or a lossy recovery).
	StatusStaleHistory Status = 0x0101
	// StatusTopicRecreated: the work was created for an earlier topic of
	// the same name.
	StatusTopicRecreated Status = 0x0102
	// StatusFencedProducer: a newer incarnation of the producer exists.
	StatusFencedProducer Status = 0x0103
	// StatusUnknownProducer: the producer id or epoch is not registered.
	StatusUnknownProducer Status = 0x0104
	// StatusOutOfOrderSequence: the batch's sequence leaves a gap; resend
	// in sequence order after the earlier batches.
	StatusOutOfOrderSequence Status = 0x0105
	// StatusDuplicateSequence: the batch was appended long ago and its
	// offsets are no longer known. (A recent duplicate is answered with
	// StatusOK and the original offsets instead.)
	StatusDuplicateSequence Status = 0x0106
	// StatusFencedSession: another process attached under the consumer
	// name.
	StatusFencedSession Status = 0x0107
	// StatusUnknownSession: the session epoch was never handed out.
	StatusUnknownSession Status = 0x0108
	// StatusFencedMember: the group member's identity is from another
	// incarnation.
	StatusFencedMember Status = 0x0109
	// StatusStaleMemberEpoch: the work predates the member's current
	// assignment of the partition.
	StatusStaleMemberEpoch Status = 0x010A
	// StatusUnknownMember: the group does not know the member.
	StatusUnknownMember Status = 0x010B
	// StatusUnassignedPartition: the member does not hold the partition.
	StatusUnassignedPartition Status = 0x010C
	// StatusOffsetOutOfRange: an offset below the log start offset or past
	// the high watermark (a poll position, a commit). The poll reply's
	// partition entry carries the current start offset and high watermark.
	StatusOffsetOutOfRange Status = 0x010D
	// StatusCommitBackwards: a commit below the committed offset without an
	// explicit ResetPosition.
	StatusCommitBackwards Status = 0x010E
	// StatusTokenRequired: the effect needs a fence token and none was
	// given.
	StatusTokenRequired Status = 0x010F
	// StatusTokenMismatch: the token was issued for another partition or
	// consumer.
	StatusTokenMismatch Status = 0x0110
	// StatusNotDelivered: a commit offset outside the range the token's
	// poll delivered.
	StatusNotDelivered Status = 0x0111
	// StatusMalformedToken: the token bytes are not a token the node issues.
	StatusMalformedToken Status = 0x0112
	// StatusUnknownHistory: the token's history epoch is absent from the
	// partition's lineage.
	StatusUnknownHistory Status = 0x0113

	// A filter plugin's failures: the poll (or its partition's entry)
	// failed because of the plugin it named, nothing was consumed, and
	// the message names the plugin and the cause (docs/PLUGINS.md).

	// StatusUnknownPlugin: the node has no plugin of that name.
	StatusUnknownPlugin Status = 0x0201
	// StatusPluginTimeout: the plugin ran past its call deadline and was
	// cut off. Polling again runs it on the same records: not retried.
	StatusPluginTimeout Status = 0x0202
	// StatusPluginTrap: the plugin trapped (a panic, an out-of-bounds
	// access, memory it could not grow).
	StatusPluginTrap Status = 0x0203
	// StatusPluginInvalidAnswer: the plugin answered outside the ABI.
	StatusPluginInvalidAnswer Status = 0x0204
	// StatusPluginError: the plugin reported an error itself (a missing
	// parameter, input it refuses).
	StatusPluginError Status = 0x0205
	// StatusPluginQuarantined: the plugin failed too often and refuses
	// calls until an operator resets it or adds its module again.
	StatusPluginQuarantined Status = 0x0206
	// StatusPluginBusy: the node's plugin memory budget, or every
	// instance of the plugin, was taken for as long as the poll could
	// wait. Momentary: retry with backoff.
	StatusPluginBusy Status = 0x0207
	// StatusPluginLoading: the node is still loading the plugin after a
	// start, and the poll's wait ended first. Retry shortly.
	StatusPluginLoading Status = 0x0208
	// StatusPluginMemoryLimit: the plugin grew its memory past the limit
	// of one instance; memory.grow failed inside the call.
	StatusPluginMemoryLimit Status = 0x0209
)

// FenceStatusBase is the first status of the fence range: a fence
// rejection with code c travels as Status(FenceStatusBase + c).
const FenceStatusBase Status = 0x0100

// RetryClass tells a client what to do after a status, so that no client
// needs a table of its own.
type RetryClass uint8

// Retry classes.
const (
	// ClassNone: the request succeeded.
	ClassNone RetryClass = iota
	// ClassRetry: nothing happened (or, after a timeout, an idempotent
	// retry is safe); send the same request again, with backoff. A
	// producer resends in sequence order.
	ClassRetry
	// ClassRefresh: nothing happened; the request was built on a stale
	// view. Drop the messages and tokens held for the partition, refresh
	// the view (poll again from the committed position, or re-read the
	// member epoch), then continue.
	ClassRefresh
	// ClassReinitialize: the client's identity is unknown here: initialize
	// the producer again, attach the consumer again, or re-read topic
	// metadata and positions.
	ClassReinitialize
	// ClassRejoin: the group member must drop all its partitions and
	// rejoin the group at epoch 0.
	ClassRejoin
	// ClassGiveUp: the request can never succeed as sent; do not retry it.
	// Surface the error to the application.
	ClassGiveUp
)

// String returns the class's name.
func (c RetryClass) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassRetry:
		return "retry"
	case ClassRefresh:
		return "refresh"
	case ClassReinitialize:
		return "reinitialize"
	case ClassRejoin:
		return "rejoin"
	case ClassGiveUp:
		return "give-up"
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

type statusInfo struct {
	name  string
	class RetryClass
}

// statusInfoOf is a switch rather than a map so that the package holds no
// mutable state and lookups do not allocate.
func statusInfoOf(s Status) (statusInfo, bool) {
	switch s {
	case StatusOK:
		return statusInfo{"ok", ClassNone}, true
	case StatusMalformedRequest:
		return statusInfo{"malformed request", ClassGiveUp}, true
	case StatusUnsupportedVersion:
		return statusInfo{"unsupported version", ClassGiveUp}, true
	case StatusUnknownKind:
		return statusInfo{"unknown kind", ClassGiveUp}, true
	case StatusMessageTooLarge:
		return statusInfo{"message too large", ClassGiveUp}, true
	case StatusInvalidArgument:
		return statusInfo{"invalid argument", ClassGiveUp}, true
	case StatusInternal:
		return statusInfo{"internal error", ClassGiveUp}, true
	case StatusBusy:
		return statusInfo{"busy", ClassRetry}, true
	case StatusTimeout:
		return statusInfo{"timeout", ClassRetry}, true
	case StatusShuttingDown:
		return statusInfo{"shutting down", ClassRetry}, true
	case StatusUnauthenticated:
		return statusInfo{"unauthenticated", ClassGiveUp}, true
	case StatusForbidden:
		return statusInfo{"forbidden", ClassGiveUp}, true
	case StatusUnknownToken:
		return statusInfo{"unknown token", ClassGiveUp}, true
	case StatusUnknownTopic:
		return statusInfo{"unknown topic", ClassGiveUp}, true
	case StatusTopicExists:
		return statusInfo{"topic exists", ClassGiveUp}, true
	case StatusUnknownPartition:
		return statusInfo{"unknown partition", ClassGiveUp}, true
	case StatusNotEnoughSpace:
		return statusInfo{"not enough space", ClassRetry}, true
	case StatusPartitionFailed:
		return statusInfo{"partition failed", ClassRetry}, true
	case StatusInvalidBatch:
		return statusInfo{"invalid batch", ClassGiveUp}, true
	case StatusStaleHistory:
		return statusInfo{"stale history", ClassRefresh}, true
	case StatusTopicRecreated:
		return statusInfo{"topic re-created", ClassReinitialize}, true
	case StatusFencedProducer:
		return statusInfo{"fenced producer", ClassGiveUp}, true
	case StatusUnknownProducer:
		return statusInfo{"unknown producer", ClassReinitialize}, true
	case StatusOutOfOrderSequence:
		return statusInfo{"out-of-order sequence", ClassRetry}, true
	case StatusDuplicateSequence:
		return statusInfo{"duplicate sequence", ClassGiveUp}, true
	case StatusFencedSession:
		return statusInfo{"fenced session", ClassGiveUp}, true
	case StatusUnknownSession:
		return statusInfo{"unknown session", ClassReinitialize}, true
	case StatusFencedMember:
		return statusInfo{"fenced member", ClassRejoin}, true
	case StatusStaleMemberEpoch:
		return statusInfo{"stale member epoch", ClassRefresh}, true
	case StatusUnknownMember:
		return statusInfo{"unknown member", ClassRejoin}, true
	case StatusUnassignedPartition:
		return statusInfo{"unassigned partition", ClassGiveUp}, true
	case StatusOffsetOutOfRange:
		return statusInfo{"offset out of range", ClassRefresh}, true
	case StatusCommitBackwards:
		return statusInfo{"commit backwards", ClassGiveUp}, true
	case StatusTokenRequired:
		return statusInfo{"token required", ClassGiveUp}, true
	case StatusTokenMismatch:
		return statusInfo{"token mismatch", ClassGiveUp}, true
	case StatusNotDelivered:
		return statusInfo{"offset not delivered", ClassGiveUp}, true
	case StatusMalformedToken:
		return statusInfo{"malformed token", ClassGiveUp}, true
	case StatusUnknownHistory:
		return statusInfo{"unknown history", ClassReinitialize}, true
	case StatusUnknownPlugin:
		return statusInfo{"unknown plugin", ClassGiveUp}, true
	case StatusPluginTimeout:
		return statusInfo{"plugin timed out", ClassGiveUp}, true
	case StatusPluginTrap:
		return statusInfo{"plugin trapped", ClassGiveUp}, true
	case StatusPluginInvalidAnswer:
		return statusInfo{"invalid plugin answer", ClassGiveUp}, true
	case StatusPluginError:
		return statusInfo{"plugin error", ClassGiveUp}, true
	case StatusPluginQuarantined:
		return statusInfo{"plugin quarantined", ClassGiveUp}, true
	case StatusPluginBusy:
		return statusInfo{"plugin busy", ClassRetry}, true
	case StatusPluginLoading:
		return statusInfo{"plugin loading", ClassRetry}, true
	case StatusPluginMemoryLimit:
		return statusInfo{"plugin memory limit", ClassGiveUp}, true
	}
	return statusInfo{}, false
}

// Known reports whether s is a status this package defines.
func (s Status) Known() bool {
	_, ok := statusInfoOf(s)
	return ok
}

// RetryClass returns what a client must do after s. Unknown statuses (from
// a newer peer) map to ClassGiveUp.
func (s Status) RetryClass() RetryClass {
	if info, ok := statusInfoOf(s); ok {
		return info.class
	}
	return ClassGiveUp
}

// Retryable reports whether a client recovers from s on its own by sending
// again: the same request (ClassRetry) or a new one built on a refreshed
// view (ClassRefresh).
func (s Status) Retryable() bool {
	c := s.RetryClass()
	return c == ClassRetry || c == ClassRefresh
}

// IsFence reports whether s is a fence rejection.
func (s Status) IsFence() bool { return s > FenceStatusBase && s <= FenceStatusBase+0xFF }

// IsPlugin reports whether s is a filter plugin's failure: a client
// surfaces it to the application whatever its retry class, so that a
// plugin's failure is never mistaken for an empty poll.
func (s Status) IsPlugin() bool { return s >= StatusUnknownPlugin && s <= 0x021F }

// String returns the status's name, or "status 0x…" for an unknown one.
func (s Status) String() string {
	if info, ok := statusInfoOf(s); ok {
		return info.name
	}
	return "status 0x" + strconv.FormatUint(uint64(s), 16)
}

// Error implements error, so a Status can be the target of errors.Is.
func (s Status) Error() string { return s.String() }

// Error is a non-OK status with a human message: what a reply carries when
// a request failed. Compare with errors.Is(err, StatusX).
type Error struct {
	Status  Status
	Message string
	// RetryAfter is a busy reply's hint: wait this long before sending
	// again (0: no hint, back off as for any retry).
	RetryAfter time.Duration
}

// Error implements error.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Status.String()
	}
	return e.Status.String() + ": " + e.Message
}

// Is reports whether target is e's Status.
func (e *Error) Is(target error) bool {
	s, ok := target.(Status)
	return ok && s == e.Status
}

// RetryClass returns what a client must do after e.
func (e *Error) RetryClass() RetryClass { return e.Status.RetryClass() }

// StatusOf maps an error to the status a reply should carry: StatusOK for
// nil; the status of a *Error, *FrameTooLargeError or Status in err's
// chain; StatusTimeout for context.DeadlineExceeded; StatusInternal for
// anything else. The node maps its own errors (fence rejections, engine
// errors) before falling back to this.
func StatusOf(err error) Status {
	if err == nil {
		return StatusOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	var ft *FrameTooLargeError
	if errors.As(err, &ft) {
		return StatusMessageTooLarge
	}
	var s Status
	if errors.As(err, &s) {
		return s
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return StatusTimeout
	}
	return StatusInternal
}

func errorf(s Status, msg string) *Error { return &Error{Status: s, Message: msg} }
