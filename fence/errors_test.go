package fence

import (
	"errors"
	"fmt"
	"testing"
)

// covers: G16
func TestCodesAreStable(t *testing.T) {
	// The numbers are on the wire; this table must only ever grow.
	want := []struct {
		code   Code
		value  uint8
		action Action
	}{
		{CodeStaleHistory, 1, RefreshPosition},
		{CodeTopicRecreated, 2, Reinitialize},
		{CodeFencedProducer, 3, GiveUp},
		{CodeUnknownProducer, 4, Reinitialize},
		{CodeOutOfOrderSequence, 5, Retry},
		{CodeDuplicateSequence, 6, GiveUp},
		{CodeFencedSession, 7, GiveUp},
		{CodeUnknownSession, 8, Reinitialize},
		{CodeFencedMember, 9, Rejoin},
		{CodeStaleMemberEpoch, 10, RefreshPosition},
		{CodeUnknownMember, 11, Rejoin},
		{CodeUnassignedPartition, 12, GiveUp},
		{CodeOffsetOutOfRange, 13, RefreshPosition},
		{CodeCommitBackwards, 14, GiveUp},
		{CodeTokenRequired, 15, GiveUp},
		{CodeTokenMismatch, 16, GiveUp},
		{CodeNotDelivered, 17, GiveUp},
		{CodeMalformedToken, 18, GiveUp},
		{CodeUnknownHistory, 19, Reinitialize},
	}
	if len(want) != int(codeEnd)-1 {
		t.Fatalf("%d codes tested, %d defined", len(want), codeEnd-1)
	}
	for _, w := range want {
		if uint8(w.code) != w.value || w.code.Action() != w.action || !w.code.Valid() {
			t.Errorf("%v = %d action %v, want %d %v", w.code, uint8(w.code), w.code.Action(), w.value, w.action)
		}
	}
	if Code(0).Valid() || codeEnd.Valid() || Code(200).Action() != GiveUp {
		t.Error("unknown codes must be invalid and give up")
	}
}

func TestErrorsIsAndRetryable(t *testing.T) {
	err := fmt.Errorf("poll: %w", reject(CodeStaleHistory, part(), "x"))
	if !errors.Is(err, ErrStaleHistory) || errors.Is(err, ErrFencedSession) {
		t.Fatal("errors.Is must match by code only")
	}
	if !Retryable(err) {
		t.Fatal("stale history is retryable")
	}
	if Retryable(ErrFencedProducer) || Retryable(errors.New("other")) || Retryable(nil) {
		t.Fatal("fenced producer, foreign errors and nil are not retryable")
	}
	if c, ok := CodeOf(err); !ok || c != CodeStaleHistory {
		t.Fatalf("CodeOf = %v %v", c, ok)
	}
	if a, ok := ActionOf(FromCode(CodeUnknownMember, "")); !ok || a != Rejoin {
		t.Fatalf("ActionOf = %v %v", a, ok)
	}
	if got := FromCode(CodeFencedMember, "late").Error(); got != "fence: fenced member: late" {
		t.Fatalf("Error() = %q", got)
	}
}
