package group

import (
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// The errors the coordinator's steps return are the owner's, so that the
// node maps them to one wire status each.
var (
	errInvalidArgument = owner.ErrInvalidArgument
	errTopicDeleted    = owner.ErrTopicDeleted
)

// invalidArgument is a request value the coordinator refuses.
func invalidArgument(msg string) error {
	return &wire.Error{Status: wire.StatusInvalidArgument, Message: msg}
}
