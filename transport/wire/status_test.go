package wire_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

func TestStatusTable(t *testing.T) {
	names := map[string]wire.Status{}
	for _, s := range allStatuses() {
		if !s.Known() {
			t.Errorf("0x%04x is not known", uint16(s))
		}
		name := s.String()
		if prev, dup := names[name]; dup {
			t.Errorf("0x%04x and 0x%04x share the name %q", uint16(prev), uint16(s), name)
		}
		names[name] = s
		if (s == wire.StatusOK) != (s.RetryClass() == wire.ClassNone) {
			t.Errorf("%v: class %v", s, s.RetryClass())
		}
		if s.IsFence() != (s >= 0x0100 && s < 0x0200) {
			t.Errorf("%v: IsFence %v", s, s.IsFence())
		}
	}
	// Every known status is listed (so the generators cover all of them).
	for s := wire.Status(0); s < 0x0400; s++ {
		if _, listed := names[s.String()]; s.Known() && !listed {
			t.Errorf("%v is known but not listed", s)
		}
	}
}

func TestRetryClasses(t *testing.T) {
	want := map[wire.Status]wire.RetryClass{
		wire.StatusOK:                  wire.ClassNone,
		wire.StatusMalformedRequest:    wire.ClassGiveUp,
		wire.StatusUnsupportedVersion:  wire.ClassGiveUp,
		wire.StatusUnknownKind:         wire.ClassGiveUp,
		wire.StatusUnauthenticated:     wire.ClassGiveUp,
		wire.StatusForbidden:           wire.ClassGiveUp,
		wire.StatusUnknownTopic:        wire.ClassGiveUp,
		wire.StatusTopicExists:         wire.ClassGiveUp,
		wire.StatusMessageTooLarge:     wire.ClassGiveUp,
		wire.StatusNotEnoughSpace:      wire.ClassRetry,
		wire.StatusPartitionFailed:     wire.ClassRetry,
		wire.StatusTimeout:             wire.ClassRetry,
		wire.StatusBusy:                wire.ClassRetry,
		wire.StatusShuttingDown:        wire.ClassRetry,
		wire.StatusOffsetOutOfRange:    wire.ClassRefresh,
		wire.StatusStaleHistory:        wire.ClassRefresh,
		wire.StatusTopicRecreated:      wire.ClassReinitialize,
		wire.StatusFencedProducer:      wire.ClassGiveUp,
		wire.StatusUnknownProducer:     wire.ClassReinitialize,
		wire.StatusOutOfOrderSequence:  wire.ClassRetry,
		wire.StatusDuplicateSequence:   wire.ClassGiveUp,
		wire.StatusFencedSession:       wire.ClassGiveUp,
		wire.StatusUnknownSession:      wire.ClassReinitialize,
		wire.StatusFencedMember:        wire.ClassRejoin,
		wire.StatusStaleMemberEpoch:    wire.ClassRefresh,
		wire.StatusUnknownMember:       wire.ClassRejoin,
		wire.StatusUnassignedPartition: wire.ClassGiveUp,
		wire.StatusCommitBackwards:     wire.ClassGiveUp,
		wire.Status(0x0999):            wire.ClassGiveUp, // unknown: from a newer peer
	}
	for s, c := range want {
		if got := s.RetryClass(); got != c {
			t.Errorf("%v: class %v, want %v", s, got, c)
		}
		if s.Retryable() != (c == wire.ClassRetry || c == wire.ClassRefresh) {
			t.Errorf("%v: Retryable %v", s, s.Retryable())
		}
	}
	if got := wire.Status(0x0999).String(); got != "status 0x999" {
		t.Errorf("unknown status prints %q", got)
	}
}

func TestErrorMatching(t *testing.T) {
	err := fmt.Errorf("poll: %w", &wire.Error{Status: wire.StatusFencedSession, Message: "consumer c attached again"})
	if !errors.Is(err, wire.StatusFencedSession) || errors.Is(err, wire.StatusFencedMember) {
		t.Fatal("errors.Is does not match the status")
	}
	if got := wire.StatusOf(err); got != wire.StatusFencedSession {
		t.Fatalf("StatusOf: %v", got)
	}
	if !strings.Contains(err.Error(), "fenced session: consumer c attached again") {
		t.Fatalf("message %q", err)
	}
	cases := map[error]wire.Status{
		nil:                                  wire.StatusOK,
		wire.StatusBusy:                      wire.StatusBusy,
		fmt.Errorf("x: %w", wire.StatusBusy): wire.StatusBusy,
		context.DeadlineExceeded:             wire.StatusTimeout,
		errors.New("disk on fire"):           wire.StatusInternal,
		&wire.FrameTooLargeError{}:           wire.StatusMessageTooLarge,
	}
	for err, want := range cases {
		if got := wire.StatusOf(err); got != want {
			t.Errorf("StatusOf(%v) = %v, want %v", err, got, want)
		}
	}
}

func TestKindNames(t *testing.T) {
	seen := map[string]wire.Kind{}
	for k := wire.Kind(0); k < 0x100; k++ {
		if !k.Defined() && !k.Reserved() {
			continue
		}
		name := k.String()
		if strings.HasPrefix(name, "kind 0x") && k < 0x70 {
			if k.Defined() {
				t.Errorf("defined kind 0x%04x has no name", uint16(k))
			}
			continue
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("0x%04x and 0x%04x share the name %q", uint16(prev), uint16(k), name)
		}
		seen[name] = k
	}
}
