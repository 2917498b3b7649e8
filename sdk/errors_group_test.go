package sdk

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// A refusal of a group member's work matches the exported sentinel and
// the fence package's, and carries the retry class its comment promises.
func TestGroupFenceErrorsAreExported(t *testing.T) {
	for _, tc := range []struct {
		status wire.Status
		fence  error
		class  wire.RetryClass
	}{
		{ErrUnknownMember, fence.ErrUnknownMember, wire.ClassRejoin},
		{ErrFencedMember, fence.ErrFencedMember, wire.ClassRejoin},
		{ErrStaleMemberEpoch, fence.ErrStaleMemberEpoch, wire.ClassRefresh},
		{ErrUnassignedPartition, fence.ErrUnassignedPartition, wire.ClassGiveUp},
	} {
		err := fmt.Errorf("commit: %w", &Error{Op: "commit", Topic: "t", Partition: 0, Status: tc.status, Message: "refused"})
		if !errors.Is(err, tc.status) || !errors.Is(err, tc.fence) {
			t.Errorf("%v: errors.Is against the sdk and fence sentinels: %v, %v", tc.status, errors.Is(err, tc.status), errors.Is(err, tc.fence))
		}
		var e *Error
		if !errors.As(err, &e) || e.Status.RetryClass() != tc.class {
			t.Errorf("%v: retry class %v, want %v", tc.status, e.Status.RetryClass(), tc.class)
		}
	}
	if errors.Is(&Error{Status: ErrUnknownMember}, ErrFencedMember) {
		t.Error("an unknown member matches ErrFencedMember")
	}
}
