package node

import (
	"fmt"
	"testing"

	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// The errors of the owner and the coordinator reach a client as the
// statuses the node gives them, and say whether to retry: a closed owner
// (the node stopping) is retried elsewhere, a deleted topic or a refused
// group deletion is not.
func TestOwnerAndGroupErrorsKeepTheirStatus(t *testing.T) {
	for _, c := range []struct {
		err   error
		want  wire.Status
		retry bool
	}{
		{owner.ErrOwnerClosed, wire.StatusShuttingDown, true},
		{fmt.Errorf("poll: %w", owner.ErrTopicDeleted), wire.StatusUnknownTopic, false},
		{owner.ErrNoConsumer, wire.StatusInvalidArgument, false},
		{group.ErrGroupNotEmpty, wire.StatusInvalidArgument, false},
	} {
		s, _ := StatusOf(c.err)
		if s != c.want || (s.RetryClass() == wire.ClassRetry) != c.retry {
			t.Errorf("%v: %s (%s), want %s, retry %v", c.err, s, s.RetryClass(), c.want, c.retry)
		}
	}
}
