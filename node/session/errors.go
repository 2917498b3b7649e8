package session

import (
	"context"
	"errors"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/pluginreg"
	"github.com/ledgemq/ledge/node/tokens"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/wire"
)

// Errors of the node's request handling. Each maps to one wire status
// (StatusOf); the comment says what a client does next.
var (
	// ErrUnknownTopic: no topic of that name (give up, or create it).
	ErrUnknownTopic = errors.New("node: unknown topic")
	// ErrTopicExists: a topic of that name exists (give up).
	ErrTopicExists = errors.New("node: topic exists")
	// ErrTopicDeleted: the topic was deleted while the request was in
	// flight (give up; a topic created later under the name is another
	// topic).
	ErrTopicDeleted = owner.ErrTopicDeleted
	// ErrUnknownPartition: the partition index is not below the topic's
	// partition count (give up).
	ErrUnknownPartition = errors.New("node: unknown partition")
	// ErrUnauthenticated: the token is unknown, expired or revoked (give
	// up; get another token).
	ErrUnauthenticated = tokens.ErrUnauthenticated
	// ErrForbidden: the token lacks the scope the request needs on the
	// topic it names (give up; use a token that has it).
	ErrForbidden = errors.New("node: forbidden")
	// ErrUnknownToken: RevokeToken named a token that does not exist.
	ErrUnknownToken = tokens.ErrUnknownToken
	// ErrShuttingDown: the node is draining (retry on a new connection).
	ErrShuttingDown = owner.ErrShuttingDown
	// ErrBusy: the node is at a limit (parked polls) and sheds load (retry
	// with backoff).
	ErrBusy = errors.New("node: busy")
	// ErrNoSpace: the disk is full; the append was refused and nothing was
	// written (retry once space is freed).
	ErrNoSpace = errors.New("node: no space left on device")
	// ErrPartitionFailed: the partition refuses appends until the node is
	// restarted (retry after the restart).
	ErrPartitionFailed = errors.New("node: partition failed")
	// ErrInvalidBatch: the record batch failed validation (give up).
	ErrInvalidBatch = errors.New("node: invalid record batch")
	// ErrInvalidArgument: a request value is out of range (give up).
	ErrInvalidArgument = owner.ErrInvalidArgument
)

// StatusOf maps an error of a request to the one status its reply carries,
// and the message for people. It is the only place where node, engine,
// fence and transport errors become wire statuses.
func StatusOf(err error) (wire.Status, string) {
	if err == nil {
		return wire.StatusOK, ""
	}
	return statusOf(err), err.Error()
}

func statusOf(err error) wire.Status {
	// A fence rejection travels as its code in the fence range.
	if c, ok := fence.CodeOf(err); ok {
		return wire.FenceStatusBase + wire.Status(c)
	}
	for _, m := range statusTable {
		if errors.Is(err, m.err) {
			return m.status
		}
	}
	var outOfRange *engine.OutOfRangeError
	var corrupt *engine.CorruptLogError
	switch {
	case errors.As(err, &outOfRange):
		return wire.StatusOffsetOutOfRange
	case errors.As(err, &corrupt):
		return wire.StatusPartitionFailed
	case engine.IsDiskFull(err):
		// A full disk met outside the log (metadata, a plugin's cache), in
		// any platform's words: retry once space is freed.
		return wire.StatusNotEnoughSpace
	case errors.Is(err, context.DeadlineExceeded):
		return wire.StatusTimeout
	case errors.Is(err, context.Canceled):
		// Requests are canceled when their connection goes away or the
		// node stops: either way the client may retry elsewhere.
		return wire.StatusShuttingDown
	}
	return wire.StatusOf(err)
}

// statusTable maps the sentinels of the node, the batch codec and the
// storage engine to statuses (the first match wins: a batch too large
// before an invalid batch). It is constant data, never written.
var statusTable = [...]struct {
	err    error
	status wire.Status
}{
	{ErrUnknownTopic, wire.StatusUnknownTopic},
	{ErrTopicDeleted, wire.StatusUnknownTopic},
	{ErrTopicExists, wire.StatusTopicExists},
	{ErrUnknownPartition, wire.StatusUnknownPartition},
	{ErrUnauthenticated, wire.StatusUnauthenticated},
	{ErrForbidden, wire.StatusForbidden},
	{ErrUnknownToken, wire.StatusUnknownToken},
	{ErrShuttingDown, wire.StatusShuttingDown},
	{ErrBusy, wire.StatusBusy},
	{ErrNoSpace, wire.StatusNotEnoughSpace},
	{ErrPartitionFailed, wire.StatusPartitionFailed},
	{ErrInvalidBatch, wire.StatusInvalidBatch},
	{ErrInvalidArgument, wire.StatusInvalidArgument},
	{owner.ErrNoConsumer, wire.StatusInvalidArgument},
	// "next" with no committed offset and no reset policy: the position
	// is out of range (PROTOCOL.md, Position.Reset).
	{owner.ErrNoPosition, wire.StatusOffsetOutOfRange},
	{owner.ErrNoProducers, wire.StatusInternal},
	{record.ErrBatchTooLarge, wire.StatusMessageTooLarge},
	{record.ErrCorruptBatch, wire.StatusInvalidBatch},
	{record.ErrUnsupportedVersion, wire.StatusInvalidBatch},
	{engine.ErrUnknownTopic, wire.StatusUnknownTopic},
	{engine.ErrTopicDeleted, wire.StatusUnknownTopic},
	{engine.ErrTopicExists, wire.StatusTopicExists},
	{engine.ErrUnknownPartition, wire.StatusUnknownPartition},
	{engine.ErrInvalidConfig, wire.StatusInvalidArgument},
	{engine.ErrInvalidBatch, wire.StatusInvalidBatch},
	{engine.ErrNoSpace, wire.StatusNotEnoughSpace},
	{engine.ErrPartitionFailed, wire.StatusPartitionFailed},
	{engine.ErrClosed, wire.StatusShuttingDown},
	// Plugins: the message names the plugin and the cause. A filter's
	// failures have statuses of their own (wire.Status.IsPlugin), so that
	// a client never takes one for an empty poll; only a budget or pool
	// momentarily full, and a plugin still loading, are retryable.
	{plugins.ErrTimeout, wire.StatusPluginTimeout},
	{plugins.ErrMemoryLimit, wire.StatusPluginMemoryLimit},
	{plugins.ErrTrap, wire.StatusPluginTrap},
	{plugins.ErrInvalidAnswer, wire.StatusPluginInvalidAnswer},
	{plugins.ErrPluginFailed, wire.StatusPluginError},
	{plugins.ErrQuarantined, wire.StatusPluginQuarantined},
	{plugins.ErrMemoryBudget, wire.StatusPluginBusy},
	{pluginreg.ErrBusy, wire.StatusPluginBusy},
	{pluginreg.ErrLoading, wire.StatusPluginLoading},
	{plugins.ErrUnknownPlugin, wire.StatusUnknownPlugin},
	{plugins.ErrCompileTimeout, wire.StatusTimeout},
	{plugins.ErrInputTooLarge, wire.StatusMessageTooLarge},
	{plugins.ErrClosed, wire.StatusShuttingDown},
	{plugins.ErrWrongKind, wire.StatusInvalidArgument},
	{plugins.ErrBadParams, wire.StatusInvalidArgument},
	{plugins.ErrInvalidModule, wire.StatusInvalidArgument},
	{plugins.ErrImportRefused, wire.StatusInvalidArgument},
}

// invalidArgument is a request value the node refuses.
func invalidArgument(msg string) error {
	return &wire.Error{Status: wire.StatusInvalidArgument, Message: msg}
}
