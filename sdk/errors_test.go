package sdk

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

func TestErrorMatching(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", statusError("commit", "t", 2, wire.StatusFencedSession, "another process attached"))
	switch {
	case !errors.Is(err, ErrFencedSession):
		t.Fatal("not sdk.ErrFencedSession")
	case !errors.Is(err, wire.StatusFencedSession):
		t.Fatal("not wire.StatusFencedSession")
	case !errors.Is(err, fence.ErrFencedSession):
		t.Fatal("not fence.ErrFencedSession")
	case errors.Is(err, ErrStaleHistory), errors.Is(err, fence.ErrStaleHistory):
		t.Fatal("matches another status")
	case IsRetryable(err):
		t.Fatal("a fenced session is retryable")
	}
	var fe *fence.Error
	if !errors.As(err, &fe) || fe.Code != fence.CodeFencedSession || fe.Action != fence.GiveUp {
		t.Fatalf("errors.As *fence.Error: %+v", fe)
	}
	var se *Error
	if !errors.As(err, &se) || se.Op != "commit" || se.Partition != 2 {
		t.Fatalf("errors.As *Error: %+v", se)
	}
	if got := se.Error(); got != "commit t/2: fenced session: another process attached" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestIsRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{statusError("produce", "t", 0, wire.StatusBusy, ""), true},
		{statusError("produce", "t", 0, wire.StatusNotEnoughSpace, ""), true},
		{statusError("poll", "t", 0, wire.StatusStaleHistory, ""), true},
		{statusError("produce", "t", 0, wire.StatusForbidden, ""), false},
		{statusError("poll", "t", 0, wire.StatusUnknownTopic, ""), false},
		{&wire.Error{Status: wire.StatusTimeout}, true},
		{transportError("poll", quic.ErrServerClosed), true},
		{transportError("poll", &quic.NotProcessedError{}), true},
		{transportError("dial", quic.ErrUnauthenticated), false},
		{fmt.Errorf("%w: x", ErrDeliveryTimeout), true},
		{ErrClosed, false},
		{context.Canceled, false},
		{nil, false},
	} {
		if got := IsRetryable(c.err); got != c.want {
			t.Errorf("IsRetryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if err := transportError("dial", quic.ErrUnauthenticated); !errors.Is(err, ErrUnauthenticated) || !errors.Is(err, quic.ErrUnauthenticated) {
		t.Fatalf("a refused token: %v", err)
	}
}
