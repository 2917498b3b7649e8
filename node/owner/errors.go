package owner

import "errors"

// Errors of an owner's steps that package node maps to wire statuses as
// its own (node.StatusOf); the comment says what a client does next.
var (
	// ErrTopicDeleted: the topic was deleted while the request was in
	// flight (give up; a topic created later under the name is another
	// topic).
	ErrTopicDeleted = errors.New("owner: topic deleted")
	// ErrShuttingDown: the node is draining (retry on a new connection).
	ErrShuttingDown = errors.New("owner: shutting down")
	// ErrInvalidArgument: a request value is out of range (give up).
	ErrInvalidArgument = errors.New("owner: invalid argument")
)

// invalidArgument is a request value the owner refuses: errors.Is matches
// ErrInvalidArgument, and the message reads as the protocol's status does.
func invalidArgument(msg string) error { return invalidArgumentError(msg) }

type invalidArgumentError string

func (e invalidArgumentError) Error() string        { return "invalid argument: " + string(e) }
func (e invalidArgumentError) Is(target error) bool { return target == ErrInvalidArgument }
