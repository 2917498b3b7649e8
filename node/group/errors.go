package group

import (
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// PolicyRecord is a commit policy attached to a named consumer or kept in
// a group's record; an empty Plugin detaches it. It is stored as JSON.
type PolicyRecord struct {
	V      int               `json:"v"`
	Plugin string            `json:"plugin"`
	Params map[string]string `json:"params,omitempty"`
}

// RecordVersion is the version of the stored policy records (and of the
// plugin registry's records beside them).
const RecordVersion = 1

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
