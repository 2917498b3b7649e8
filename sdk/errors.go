package sdk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// Errors a node answers with, for errors.Is. Each is a wire.Status: every
// *Error carrying that status matches it, and so does a *wire.Error. The
// comment says what to do.
const (
	// ErrUnauthenticated: the token is unknown, expired or revoked. Fix the
	// credentials; do not retry as is.
	ErrUnauthenticated = wire.StatusUnauthenticated
	// ErrForbidden: the token lacks the scope the request needs on the
	// topic. Do not retry with this token.
	ErrForbidden = wire.StatusForbidden
	// ErrUnauthorized is ErrForbidden under the name other clients use.
	ErrUnauthorized = wire.StatusForbidden
	// ErrUnknownToken: RevokeToken named a token id that does not exist.
	ErrUnknownToken = wire.StatusUnknownToken
	// ErrUnknownTopic: no topic of that name.
	ErrUnknownTopic = wire.StatusUnknownTopic
	// ErrTopicExists: CreateTopic named an existing topic.
	ErrTopicExists = wire.StatusTopicExists
	// ErrUnknownPartition: the partition index is not below the topic's
	// partition count.
	ErrUnknownPartition = wire.StatusUnknownPartition
	// ErrInvalidArgument: the node refused a value of the request.
	ErrInvalidArgument = wire.StatusInvalidArgument
	// ErrMessageTooLarge: a record, batch or frame exceeds its limit.
	ErrMessageTooLarge = wire.StatusMessageTooLarge
	// ErrInvalidBatch: the node refused a record batch as malformed (a bug
	// in the client, or corruption on the way).
	ErrInvalidBatch = wire.StatusInvalidBatch
	// ErrBusy: the node is at a bound (requests or bytes in flight, parked
	// polls, its memory) or past its CPU, and served nothing. Retryable
	// after Error.RetryAfter: producers and consumers wait it themselves
	// (docs/OPERATIONS.md, "Overload").
	ErrBusy = wire.StatusBusy
	// ErrNotEnoughSpace: the node's disk is full; nothing was written.
	// Retryable once space is freed.
	ErrNotEnoughSpace = wire.StatusNotEnoughSpace
	// ErrPartitionFailed: the partition refuses appends until the node
	// reopens it. Retryable.
	ErrPartitionFailed = wire.StatusPartitionFailed

	// ErrStaleHistory: the work was created before a purge or a lossy
	// recovery of the partition. The consumer drops what it held for the
	// partition and polls again from its committed position.
	ErrStaleHistory = wire.StatusStaleHistory
	// ErrTopicRecreated: the topic was deleted and created again under the
	// same name since this client read its metadata. Create a new producer
	// or consumer.
	ErrTopicRecreated = wire.StatusTopicRecreated
	// ErrFencedProducer: a newer incarnation of the producer exists.
	ErrFencedProducer = wire.StatusFencedProducer
	// ErrFencedSession: another process attached under this consumer's
	// name. This consumer can neither poll nor commit again; give up.
	ErrFencedSession = wire.StatusFencedSession
	// ErrOffsetOutOfRange: a position below the log start offset or past
	// the high watermark.
	ErrOffsetOutOfRange = wire.StatusOffsetOutOfRange
	// ErrCommitBackwards: a commit below the committed offset; use
	// Consumer.ResetPosition to move it back on purpose.
	ErrCommitBackwards = wire.StatusCommitBackwards
	// ErrNotDelivered: a commit of an offset the token's poll did not
	// deliver.
	ErrNotDelivered = wire.StatusNotDelivered
	// ErrDuplicateSequence: a produce retry of a batch appended so long ago
	// that the node no longer knows its offsets. The records were written
	// once; their offsets are unknown.
	ErrDuplicateSequence = wire.StatusDuplicateSequence
	// A filter plugin's failures. Poll returns them, with a message naming
	// the plugin and the cause, on the first poll that met them; nothing
	// was consumed from the partitions they name. Each says its retry
	// class (Error.Retryable, IsRetryable).

	// ErrUnknownPlugin: the node has no plugin of the poll's filter name,
	// or could not load it. Give up (add it, or fix the name).
	ErrUnknownPlugin = wire.StatusUnknownPlugin
	// ErrPluginTimeout: the filter ran past its call deadline and was cut
	// off. Give up: polling again would run it on the same records, and
	// each timeout is a strike towards its quarantine.
	ErrPluginTimeout = wire.StatusPluginTimeout
	// ErrPluginTrap: the filter trapped (a panic, an out-of-bounds access,
	// memory it could not grow). Give up, as for ErrPluginTimeout.
	ErrPluginTrap = wire.StatusPluginTrap
	// ErrPluginMemoryLimit: the filter grew its memory past the limit of
	// one instance (memory.grow failed inside the call). Give up, as for
	// ErrPluginTimeout.
	ErrPluginMemoryLimit = wire.StatusPluginMemoryLimit
	// ErrPluginInvalidAnswer: the filter answered outside the plugin ABI.
	// Give up, as for ErrPluginTimeout.
	ErrPluginInvalidAnswer = wire.StatusPluginInvalidAnswer
	// ErrPluginError: the filter reported an error itself (a missing
	// parameter, input it refuses). Give up unless the parameters change.
	ErrPluginError = wire.StatusPluginError
	// ErrPluginQuarantined: the filter failed too often and is refused
	// until an operator resets it (ledge plugin reset) or adds its module
	// again. Give up.
	ErrPluginQuarantined = wire.StatusPluginQuarantined
	// ErrPluginBusy: the node's plugin memory budget, or every instance
	// of the filter, was taken for as long as the poll could wait.
	// Retryable, with backoff.
	ErrPluginBusy = wire.StatusPluginBusy
	// ErrPluginLoading: the node started recently and is still loading the
	// filter. Retryable shortly.
	ErrPluginLoading = wire.StatusPluginLoading
)

// Errors of the client itself.
var (
	// ErrClosed: the client, producer or consumer was closed.
	ErrClosed = errors.New("sdk: closed")
	// ErrDeliveryTimeout: a record was not acknowledged within the
	// producer's delivery timeout. Err wraps the last failure; whether the
	// record was written is unknown unless that failure says otherwise.
	ErrDeliveryTimeout = errors.New("sdk: delivery timeout")
	// ErrUnknownOutcome: the producer gave up on a record after an attempt
	// whose outcome it could not learn (a reply lost with the connection,
	// a node that timed out): the record may or may not have been written.
	// Err wraps the cause.
	ErrUnknownOutcome = errors.New("sdk: the record may or may not have been written")
	// ErrNoCredentials: no token was given and none was found in a data
	// directory.
	ErrNoCredentials = errors.New("sdk: no token: use WithToken, WithTokenFile or WithDataDir")
	// ErrNotNamed: the operation needs a named consumer (WithConsumerName).
	ErrNotNamed = errors.New("sdk: the consumer has no name: use WithConsumerName to commit")
)

// Error is a request the node refused, or a connection it closed. Status
// says what happened and Status.RetryClass() what to do next. errors.Is
// matches it against its status (sdk.ErrX or wire.StatusX), and, for fence
// rejections, against the fence sentinel of its code (fence.ErrX);
// errors.As finds the *fence.Error of a fence rejection.
type Error struct {
	// Op is the request: "produce", "poll", "commit", "create-topic", ...
	Op string
	// Topic and Partition name what the request was about, when it was
	// about one partition (Partition is -1 otherwise).
	Topic     string
	Partition int32
	Status    wire.Status
	// Message is the node's explanation, for people.
	Message string
	// RetryAfter is a busy answer's hint: how long the node asked the
	// client to wait before sending again (0: no hint).
	RetryAfter time.Duration
	// cause is a transport error the status was derived from.
	cause error
}

// Error implements error.
func (e *Error) Error() string {
	s := e.Op
	switch {
	case e.Topic != "" && e.Partition >= 0:
		s += fmt.Sprintf(" %s/%d", e.Topic, e.Partition)
	case e.Topic != "":
		s += " " + e.Topic
	}
	s += ": " + e.Status.String()
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is matches e's status.
func (e *Error) Is(target error) bool {
	s, ok := target.(wire.Status)
	return ok && s == e.Status
}

// Unwrap returns the fence rejection of a fence status (so that
// errors.Is(err, fence.ErrFencedSession) holds) and the transport error e
// was derived from, if any.
func (e *Error) Unwrap() []error {
	var out []error
	if e.Status.IsFence() {
		out = append(out, fence.FromCode(fence.Code(e.Status-wire.FenceStatusBase), e.Message))
	}
	if e.cause != nil {
		out = append(out, e.cause)
	}
	return out
}

// Retryable reports whether sending again can succeed (see IsRetryable).
func (e *Error) Retryable() bool { return e.Status.Retryable() || quic.IsRetryable(e.cause) }

// IsRetryable reports whether err is worth retrying: a node status of
// class retry or refresh (busy, timeout, disk full, shutting down, stale
// history — poll again), or a transport failure after which a new
// connection can succeed (the node restarted, a request was not
// processed, an idle or handshake timeout). Refused credentials, unknown
// topics, invalid requests, fenced producers and sessions, a closed
// client and a cancelled context are not retryable.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Retryable()
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Status.Retryable()
	}
	if errors.Is(err, ErrDeliveryTimeout) {
		return true
	}
	return quic.IsRetryable(err)
}

// nodeError wraps a *wire.Error of a reply into an *Error.
func nodeError(op, topic string, partition int32, err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		return &Error{Op: op, Topic: topic, Partition: partition, Status: we.Status, Message: we.Message, RetryAfter: we.RetryAfter}
	}
	return err
}

// statusError builds the *Error of a per-partition status in a reply.
func statusError(op, topic string, partition uint32, s wire.Status, msg string) error {
	if s == wire.StatusOK {
		return nil
	}
	return &Error{Op: op, Topic: topic, Partition: int32(partition), Status: s, Message: msg}
}

// transportError maps the transport's verdicts on a connection to statuses
// where a caller expects one: a refused or revoked token is
// ErrUnauthenticated, whatever the layer that noticed it.
func transportError(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, quic.ErrUnauthenticated):
		return &Error{Op: op, Partition: -1, Status: wire.StatusUnauthenticated, Message: "the node refused the token", cause: err}
	case errors.Is(err, quic.ErrTokenRevoked):
		return &Error{Op: op, Partition: -1, Status: wire.StatusUnauthenticated, Message: "the token was revoked", cause: err}
	}
	return fmt.Errorf("sdk: %s: %w", op, err)
}

// ErrNodeUnreachable: Dial reached no node at the address it dialed
// (nothing listens there, the network drops the packets, the name does
// not resolve) before its dial timeout or the context ended. The
// *DialError that matches it says which address, where the address came
// from and what to check; errors.Is also matches its cause
// (context.DeadlineExceeded, a *net.OpError...). Check the address and
// that the node runs; retrying as is helps only if it is starting.
var ErrNodeUnreachable = errors.New("sdk: no node answered")

// AddrSource says where Dial took the address it dialed from.
type AddrSource int

// Where an address comes from, in Dial's order of precedence.
const (
	// AddrGiven: the address passed to Dial.
	AddrGiven AddrSource = iota
	// AddrEnv: the LEDGE_SERVER environment variable (EnvServer).
	AddrEnv
	// AddrListenFile: the listen file a running node keeps in its data
	// directory (WithDataDir, LEDGE_DATA_DIR, else ./ledge-data).
	AddrListenFile
	// AddrDefault: DefaultAddr, for want of all the above.
	AddrDefault
)

// String names the source as a person would look for it.
func (s AddrSource) String() string {
	switch s {
	case AddrGiven:
		return "the address given to Dial"
	case AddrEnv:
		return EnvServer
	case AddrListenFile:
		return "the node's listen file"
	case AddrDefault:
		return "the default address"
	}
	return fmt.Sprintf("AddrSource(%d)", int(s))
}

// DialError is Dial's failure to reach a node: errors.Is matches it
// against ErrNodeUnreachable and against its cause. Refused credentials
// and certificates are not DialErrors: they come from a node that
// answered.
type DialError struct {
	// Addr is the address dialed.
	Addr string
	// Source is where Addr came from.
	Source AddrSource
	// From says where in words: the variable, the listen file's path, or
	// why the default applied (no LEDGE_SERVER, no listen file in the
	// data directory, or a stale one).
	From string
	// NotListening is set when the host answered that nothing listens on
	// the port (an ICMP port unreachable), so Dial did not wait out its
	// timeout.
	NotListening bool
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *DialError) Error() string {
	what := "no Ledge node answered at " + e.Addr
	if e.NotListening {
		what = "nothing listens at " + e.Addr
	}
	var check string
	switch e.Source {
	case AddrGiven:
		check = "is the node running, and is this its QUIC address?"
	case AddrEnv:
		check = "is the node running, and is " + EnvServer + " its QUIC address?"
	case AddrListenFile:
		check = "the node that wrote it runs but does not answer there: is it still starting, or is a firewall in the way?"
	default:
		check = "is a node running? One on another address or data directory is found through " + EnvServer +
			", or its data directory (WithDataDir, " + EnvDataDir + ")"
	}
	return fmt.Sprintf("sdk: %s (%s): %s (%v)", what, e.From, check, e.Err)
}

// Unwrap returns ErrNodeUnreachable and the cause.
func (e *DialError) Unwrap() []error { return []error{ErrNodeUnreachable, e.Err} }
