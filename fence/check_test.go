package fence

import (
	"errors"
	"testing"
)

var (
	topicA = TopicID{0xa1, 1, 2, 3}
	topicB = TopicID{0xb2, 1, 2, 3}
)

// part is partition 3 of topicA at history 2, holding [10, 20).
func part() Partition {
	return Partition{Topic: topicA, Index: 3, History: 2, LogStart: 10, HighWatermark: 20}
}

func consumer(session SessionEpoch) Holder {
	return Holder{Kind: HolderConsumer, Consumer: NameHash("billing"), Session: session}
}

func member(epoch, assigned MemberEpoch) Holder {
	return Holder{Kind: HolderMember, Consumer: NameHash("g"), Member: MemberFacts{
		ID: NameHash("m-1"), Known: true, Epoch: epoch, Holds: true, AssignmentEpoch: assigned,
	}}
}

func anon() Holder { return Holder{Kind: HolderAnonymous} }

// delivered is a token of h's poll on part() that delivered [12, 15).
func delivered(h Holder) Token { return Issue(part(), h, 12).Through(15) }

func wantErr(t *testing.T, got, want error) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Fatalf("got %v, want acceptance", got)
		}
		return
	}
	if !errors.Is(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// covers: G1 G7 G8 G13 G14 G15 G18
func TestCheckCurrent(t *testing.T) {
	p := part()
	tok := delivered(consumer(4))
	with := func(f func(*Token)) Token { c := tok; f(&c); return c }
	cases := []struct {
		name string
		p    Partition
		h    Holder
		t    Token
		want error
	}{
		{"current", p, consumer(4), tok, nil},
		{"no token", p, consumer(4), Token{}, ErrTokenRequired},
		{"purged since", Partition{Topic: topicA, Index: 3, History: 3, LogStart: 20, HighWatermark: 20}, consumer(4), tok, ErrStaleHistory},
		{"lossy recovery since", Partition{Topic: topicA, Index: 3, History: 3, LogStart: 10, HighWatermark: 1000}, consumer(4), tok, ErrStaleHistory},
		{"token from a later history", p, consumer(4), with(func(c *Token) { c.History = 9 }), ErrUnknownHistory},
		{"topic re-created", Partition{Topic: topicB, Index: 3, History: 2, LogStart: 10, HighWatermark: 20}, consumer(4), tok, ErrTopicRecreated},
		{"other partition", p, consumer(4), with(func(c *Token) { c.Partition = 4 }), ErrTokenMismatch},
		{"other consumer", p, Holder{Kind: HolderConsumer, Consumer: NameHash("other"), Session: 4}, tok, ErrTokenMismatch},
		{"session replaced", p, consumer(5), tok, ErrFencedSession},
		{"session never issued", p, consumer(3), tok, ErrUnknownSession},
		{"kind mismatch", p, anon(), tok, ErrTokenMismatch},
		{"anonymous current", p, anon(), delivered(anon()), nil},
		{"anonymous purged", Partition{Topic: topicA, Index: 3, History: 3, LogStart: 20, HighWatermark: 25}, anon(), delivered(anon()), ErrStaleHistory},
		{"member current", p, member(7, 5), delivered(member(7, 5)), nil},
		{"member other id", p, func() Holder { h := member(7, 5); h.Member.ID = NameHash("m-2"); return h }(), delivered(member(7, 5)), ErrTokenMismatch},
		{"member other group", p, func() Holder { h := member(7, 5); h.Consumer = NameHash("g2"); return h }(), delivered(member(7, 5)), ErrTokenMismatch},
		{"member regained p", p, member(9, 9), delivered(member(7, 5)), ErrStaleMemberEpoch},
		{"member epoch bumped, kept p", p, member(9, 5), delivered(member(7, 5)), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantErr(t, CheckCurrent(c.p, c.h, c.t), c.want) })
	}
}

// covers: G15
func TestCheckMember(t *testing.T) {
	holds := MemberFacts{ID: 1, Known: true, Epoch: 10, Holds: true, AssignmentEpoch: 6}
	cases := []struct {
		name  string
		m     MemberFacts
		epoch MemberEpoch
		want  error
	}{
		{"request at member epoch", holds, 10, nil},
		{"request at assignment epoch", holds, 6, nil},
		{"request between", holds, 8, nil},
		{"request before the assignment (regain)", holds, 5, ErrStaleMemberEpoch},
		{"request ahead of the member", holds, 11, ErrFencedMember},
		{"unknown member", MemberFacts{ID: 1, Epoch: 10}, 10, ErrUnknownMember},
		{"partition moved away", MemberFacts{ID: 1, Known: true, Epoch: 10}, 10, ErrUnassignedPartition},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantErr(t, CheckMember(c.m, c.epoch), c.want) })
	}
}

// covers: G13
func TestCheckSession(t *testing.T) {
	wantErr(t, CheckSession(0, 0), nil)
	wantErr(t, CheckSession(3, 3), nil)
	wantErr(t, CheckSession(4, 3), ErrFencedSession)
	wantErr(t, CheckSession(3, 4), ErrUnknownSession)
}

// covers: G1 G8
func TestCheckPollCompletion(t *testing.T) {
	p := part()
	purged := Partition{Topic: topicA, Index: 3, History: 3, LogStart: 20, HighWatermark: 25}
	retained := Partition{Topic: topicA, Index: 3, History: 2, LogStart: 14, HighWatermark: 20}
	cases := []struct {
		name string
		p    Partition
		h    Holder
		t    Token
		want error
	}{
		{"current", p, consumer(4), delivered(consumer(4)), nil},
		{"empty poll", p, consumer(4), Issue(p, consumer(4), 20), nil},
		{"purged during the read", purged, consumer(4), delivered(consumer(4)), ErrStaleHistory},
		{"anonymous purged during the read", purged, anon(), delivered(anon()), ErrStaleHistory},
		{"retention during the read keeps the history", retained, consumer(4), delivered(consumer(4)), nil},
		{"past the high watermark", p, consumer(4), Issue(p, consumer(4), 12).Through(21), ErrOffsetOutOfRange},
		{"inverted range", p, consumer(4), Issue(p, consumer(4), 15).Through(12), ErrOffsetOutOfRange},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantErr(t, CheckPollCompletion(c.p, c.h, c.t), c.want) })
	}
}

// covers: G2 G5
func TestCheckAutoCommit(t *testing.T) {
	p := part()
	purged := Partition{Topic: topicA, Index: 3, History: 3, LogStart: 20, HighWatermark: 25}
	retained := Partition{Topic: topicA, Index: 3, History: 2, LogStart: 16, HighWatermark: 20}
	cases := []struct {
		name      string
		p         Partition
		h         Holder
		t         Token
		committed uint64
		advance   bool
		want      error
	}{
		{"advances", p, consumer(4), delivered(consumer(4)), 12, true, nil},
		{"already covered", p, consumer(4), delivered(consumer(4)), 15, false, nil},
		{"behind a later commit", p, consumer(4), delivered(consumer(4)), 18, false, nil},
		{"purged before it was applied", purged, consumer(4), delivered(consumer(4)), 20, false, ErrStaleHistory},
		{"session replaced", p, consumer(5), delivered(consumer(4)), 12, false, ErrFencedSession},
		{"anonymous cannot commit", p, anon(), delivered(anon()), 12, false, ErrTokenMismatch},
		{"retention passed the delivered end", retained, consumer(4), delivered(consumer(4)), 12, false, ErrOffsetOutOfRange},
		{"member", p, member(7, 5), delivered(member(7, 5)), 0, true, nil},
		{"member lost p", p, func() Holder { h := member(8, 5); h.Member.Holds = false; return h }(), delivered(member(7, 5)), 0, false, ErrUnassignedPartition},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			adv, err := CheckAutoCommit(c.p, c.h, c.t, c.committed)
			wantErr(t, err, c.want)
			if adv != c.advance {
				t.Fatalf("advance = %v, want %v", adv, c.advance)
			}
		})
	}
}

// covers: G3 G4 G5
func TestCheckCommit(t *testing.T) {
	p := part()
	// After a purge at 20 and five appends, offset 14 is numerically
	// valid nowhere, but offset 22 would be: neither may be committed with
	// the old token.
	purged := Partition{Topic: topicA, Index: 3, History: 3, LogStart: 20, HighWatermark: 25}
	cases := []struct {
		name      string
		p         Partition
		h         Holder
		t         Token
		offset    uint64
		committed uint64
		want      error
	}{
		{"delivered end", p, consumer(4), delivered(consumer(4)), 15, 12, nil},
		{"inside the delivered range", p, consumer(4), delivered(consumer(4)), 13, 12, nil},
		{"same as committed", p, consumer(4), delivered(consumer(4)), 13, 13, nil},
		{"no token", p, consumer(4), Token{}, 15, 12, ErrTokenRequired},
		{"older history", purged, consumer(4), Issue(p, consumer(4), 12).Through(20), 20, 20, ErrStaleHistory},
		{"older history, numerically valid now", purged, consumer(4), Issue(p, consumer(4), 12).Through(22), 22, 20, ErrStaleHistory},
		{"past what was delivered", p, consumer(4), delivered(consumer(4)), 16, 12, ErrNotDelivered},
		{"before what was delivered", p, consumer(4), delivered(consumer(4)), 11, 0, ErrNotDelivered},
		{"below the log start", Partition{Topic: topicA, Index: 3, History: 2, LogStart: 14, HighWatermark: 20}, consumer(4), delivered(consumer(4)), 13, 0, ErrOffsetOutOfRange},
		{"past the high watermark", p, consumer(4), Issue(p, consumer(4), 18).Through(22), 22, 12, ErrOffsetOutOfRange},
		{"backwards", p, consumer(4), delivered(consumer(4)), 13, 14, ErrCommitBackwards},
		{"fenced session", p, consumer(5), delivered(consumer(4)), 15, 12, ErrFencedSession},
		{"anonymous token", p, anon(), delivered(anon()), 15, 12, ErrTokenMismatch},
		{"topic re-created", Partition{Topic: topicB, Index: 3, History: 1, LogStart: 0, HighWatermark: 20}, consumer(4), delivered(consumer(4)), 15, 0, ErrTopicRecreated},
		{"member current", p, member(7, 5), delivered(member(7, 5)), 15, 12, nil},
		{"member fenced out and unknown", p, Holder{Kind: HolderMember, Consumer: NameHash("g"), Member: MemberFacts{ID: NameHash("m-1")}}, delivered(member(7, 5)), 15, 12, ErrUnknownMember},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantErr(t, CheckCommit(c.p, c.h, c.t, c.offset, c.committed), c.want) })
	}
}

// covers: G5
func TestCheckReset(t *testing.T) {
	p := part()
	purged := Partition{Topic: topicA, Index: 3, History: 3, LogStart: 20, HighWatermark: 25}
	cases := []struct {
		name   string
		p      Partition
		h      Holder
		t      Token
		offset uint64
		want   error
	}{
		{"backwards to the log start", p, consumer(4), delivered(consumer(4)), 10, nil},
		{"forward to the high watermark", p, consumer(4), delivered(consumer(4)), 20, nil},
		{"below the log start", p, consumer(4), delivered(consumer(4)), 9, ErrOffsetOutOfRange},
		{"past the high watermark", p, consumer(4), delivered(consumer(4)), 21, ErrOffsetOutOfRange},
		{"older history", purged, consumer(4), delivered(consumer(4)), 20, ErrStaleHistory},
		{"no token", p, consumer(4), Token{}, 10, ErrTokenRequired},
		{"anonymous", p, anon(), delivered(anon()), 10, ErrTokenMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantErr(t, CheckReset(c.p, c.h, c.t, c.offset), c.want) })
	}
}

// covers: G1 G3
func TestRejectionCarriesPartitionState(t *testing.T) {
	purged := Partition{Topic: topicA, Index: 3, History: 3, LogStart: 20, HighWatermark: 25}
	err := CheckCommit(purged, consumer(4), delivered(consumer(4)), 15, 0)
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("got %v, want *Error", err)
	}
	if fe.History != 3 || fe.LogStart != 20 || fe.HighWatermark != 25 {
		t.Fatalf("facts = %d [%d,%d), want 3 [20,25)", fe.History, fe.LogStart, fe.HighWatermark)
	}
	if !Retryable(err) || fe.Action != RefreshPosition {
		t.Fatalf("stale history must be retryable by refreshing the position, got %v", fe.Action)
	}
}

// covers: G4
func TestCheckPosition(t *testing.T) {
	p := part()
	wantErr(t, CheckPosition(p, 10), nil)
	wantErr(t, CheckPosition(p, 20), nil)
	wantErr(t, CheckPosition(p, 9), ErrOffsetOutOfRange)
	wantErr(t, CheckPosition(p, 21), ErrOffsetOutOfRange)
}

// A heartbeat or a leave belongs to the member's current incarnation only
// if it states an epoch that incarnation had.
func TestCheckHeartbeatAndLeave(t *testing.T) {
	m := &Incarnation{Joined: 3, Epoch: 5}
	for _, c := range []struct {
		m      *Incarnation
		stated MemberEpoch
		want   error
	}{
		{nil, 1, ErrUnknownMember},
		{m, 2, ErrFencedMember},
		{m, 3, nil},
		{m, 5, nil},
		{m, 6, ErrFencedMember},
	} {
		if err := CheckHeartbeat(c.m, c.stated); !errors.Is(err, c.want) && (err != nil || c.want != nil) {
			t.Errorf("heartbeat at %d with %+v: %v, want %v", c.stated, c.m, err, c.want)
		}
	}
	for stated, want := range map[MemberEpoch]bool{0: true, 2: false, 3: true, 9: true} {
		if got := LeaveApplies(*m, stated); got != want {
			t.Errorf("leave at %d: %v, want %v", stated, got, want)
		}
	}
}
