package fence

// Partition is what the owner knows of a partition at the moment it checks
// a piece of work: the facts every rule compares a token with.
type Partition struct {
	Topic         TopicID
	Index         uint32
	History       HistoryEpoch
	LogStart      uint64 // first offset readers may see
	HighWatermark uint64 // exclusive end of what readers may see
}

// Holder is what the owner currently knows about the consumer on whose
// behalf work is done, taken from the request (names) and from the owner's
// own state (epochs). Kind must match the token's kind.
type Holder struct {
	Kind HolderKind
	// Consumer is NameHash of the consumer name or group name in the request.
	Consumer uint64
	// Session is the named consumer's current session epoch (0 if no
	// process ever attached).
	Session SessionEpoch
	// Member holds the group's current facts about the requesting member.
	Member MemberFacts
}

// MemberFacts is what a group coordinator knows about one member and one
// partition p at the moment of a check.
type MemberFacts struct {
	// ID is NameHash of the member id in the request.
	ID uint64
	// Known: the group has this member now.
	Known bool
	// Epoch is the member's current epoch.
	Epoch MemberEpoch
	// Holds: the member currently holds p (including while a revocation
	// of p is not yet confirmed).
	Holds bool
	// AssignmentEpoch is the member epoch at which it received p.
	AssignmentEpoch MemberEpoch
}

// Issue returns the token for work started now on p on behalf of h, for a
// read starting at from. The owner calls it when it plans a poll (and when
// it hands out a position, e.g. on attach); the range is empty until the
// read's end is known (Token.Through).
func Issue(p Partition, h Holder, from uint64) Token {
	t := Token{
		Topic:     p.Topic,
		Partition: p.Index,
		History:   p.History,
		Kind:      h.Kind,
		From:      from,
		Next:      from,
	}
	switch h.Kind {
	case HolderConsumer:
		t.Consumer, t.Session = h.Consumer, h.Session
	case HolderMember:
		t.Consumer, t.Member = h.Consumer, h.Member.ID
		t.MemberEpoch, t.AssignmentEpoch = h.Member.Epoch, h.Member.AssignmentEpoch
	}
	return t
}

// Through returns t with its delivered range ending at next.
func (t Token) Through(next uint64) Token {
	t.Next = next
	return t
}

// CheckCurrent is the world check every effect starts with: the token must
// have been issued for this topic creation, this partition, the current
// history epoch, and a holder whose session or group membership still
// authorizes it. A parked long-poll runs it when it wakes.
func CheckCurrent(p Partition, h Holder, t Token) error {
	return checkCurrent(&p, &h, &t)
}

func checkCurrent(p *Partition, h *Holder, t *Token) error {
	switch {
	case t.IsZero():
		return reject(CodeTokenRequired, *p, "no token")
	case t.Topic != p.Topic:
		return reject(CodeTopicRecreated, *p, "token is for topic id %s, the topic is now %s", t.Topic, p.Topic)
	case t.Partition != p.Index:
		return reject(CodeTokenMismatch, *p, "token is for partition %d, not %d", t.Partition, p.Index)
	case t.History < p.History:
		return reject(CodeStaleHistory, *p, "token is from history epoch %d, the partition is at %d", t.History, p.History)
	case t.History > p.History:
		return reject(CodeUnknownHistory, *p, "token is from history epoch %d, ahead of the partition's %d", t.History, p.History)
	case t.Kind != h.Kind:
		return reject(CodeTokenMismatch, *p, "token was issued to a %s, the request is from a %s", t.Kind, h.Kind)
	}
	switch t.Kind {
	case HolderConsumer:
		if t.Consumer != h.Consumer {
			return reject(CodeTokenMismatch, *p, "token was issued to another consumer")
		}
		return checkSession(*p, h.Session, t.Session)
	case HolderMember:
		if t.Consumer != h.Consumer {
			return reject(CodeTokenMismatch, *p, "token was issued to another group")
		}
		if t.Member != h.Member.ID {
			return reject(CodeTokenMismatch, *p, "token was issued to another member")
		}
		return checkMember(*p, &h.Member, t.MemberEpoch)
	}
	return nil
}

// CheckSession is the named-consumer rule: only the latest process that
// attached under a name may act for it. got is the session epoch the work
// was created under, current the name's session epoch now.
func CheckSession(current, got SessionEpoch) error {
	return checkSession(Partition{}, current, got)
}

func checkSession(p Partition, current, got SessionEpoch) error {
	switch {
	case got < current:
		return reject(CodeFencedSession, p, "session %d was replaced by session %d", got, current)
	case got > current:
		return reject(CodeUnknownSession, p, "session %d was never handed out (current %d)", got, current)
	}
	return nil
}

// CheckMember is the group rule: work of a member on partition p, created
// at requestEpoch, is accepted only if the member is known, holds p, and
// assignmentEpoch(p) <= requestEpoch <= memberEpoch. Work from before the
// member last received p (a regain included) is stale.
func CheckMember(m MemberFacts, requestEpoch MemberEpoch) error {
	return checkMember(Partition{}, &m, requestEpoch)
}

// Incarnation is what a group's coordinator knows of a member's current
// incarnation: the epoch it joined at and its epoch now.
type Incarnation struct {
	Joined, Epoch MemberEpoch
}

// CheckHeartbeat is the rule for a member's heartbeat stating epoch
// stated: m is the member's current incarnation, or nil if the group does
// not know the member (fence.ErrUnknownMember). An epoch this incarnation
// never had — above its epoch, or from before it joined — is an earlier
// incarnation's (fence.ErrFencedMember). Either way the member rejoins.
func CheckHeartbeat(m *Incarnation, stated MemberEpoch) error {
	switch {
	case m == nil:
		return reject(CodeUnknownMember, Partition{}, "the group does not know the member")
	case stated > m.Epoch || stated < m.Joined:
		return reject(CodeFencedMember, Partition{}, "member of epochs %d to %d: the heartbeat says %d", m.Joined, m.Epoch, stated)
	}
	return nil
}

// LeaveApplies says whether a leave stating epoch stated removes the
// member's current incarnation m: epoch 0 leaves whatever the incarnation;
// a leave from before m joined is an earlier incarnation's and is ignored.
func LeaveApplies(m Incarnation, stated MemberEpoch) bool {
	return stated == 0 || stated >= m.Joined
}

func checkMember(p Partition, m *MemberFacts, requestEpoch MemberEpoch) error {
	switch {
	case !m.Known:
		return reject(CodeUnknownMember, p, "the group does not know the member")
	case requestEpoch > m.Epoch:
		return reject(CodeFencedMember, p, "request epoch %d is ahead of the member's epoch %d", requestEpoch, m.Epoch)
	case !m.Holds:
		return reject(CodeUnassignedPartition, p, "the member does not hold partition %d", p.Index)
	case requestEpoch < m.AssignmentEpoch:
		return reject(CodeStaleMemberEpoch, p, "request epoch %d predates the assignment of the partition at epoch %d", requestEpoch, m.AssignmentEpoch)
	}
	return nil
}

// CheckPollCompletion decides whether a finished read may become a reply:
// the world must be the one the poll was planned in, and the delivered
// range [t.From, t.Next) must lie within the partition's history. A stale
// poll returns no messages and changes nothing; its error is retryable.
// Retention that raised the log start during the read does not stale it:
// those records belonged to the current history.
func CheckPollCompletion(p Partition, h Holder, t Token) error {
	if err := checkCurrent(&p, &h, &t); err != nil {
		return err
	}
	if t.From > t.Next || t.Next > p.HighWatermark {
		return reject(CodeOffsetOutOfRange, p, "delivered range [%d,%d) is past the high watermark %d", t.From, t.Next, p.HighWatermark)
	}
	return nil
}

// CheckAutoCommit decides an automatic commit of what token t delivered
// (commit-on-delivery at completion, commit-on-next-poll later): it moves
// the committed offset to t.Next. committed is the holder's effective
// committed offset in the current history. advance is false when the
// commit would not move progress forward; such a commit is dropped
// silently, since a later commit has already covered it.
func CheckAutoCommit(p Partition, h Holder, t Token, committed uint64) (advance bool, err error) {
	if err := checkCommitter(&p, &h, &t); err != nil {
		return false, err
	}
	if t.Next < p.LogStart || t.Next > p.HighWatermark {
		return false, reject(CodeOffsetOutOfRange, p, "offset %d is outside [%d,%d]", t.Next, p.LogStart, p.HighWatermark)
	}
	return t.Next > committed, nil
}

// CheckCommit decides a manual commit of offset (the next offset to
// consume) derived from token t. The offset must lie in the range the token
// delivered, within [log start, high watermark], and not below committed
// (the holder's effective committed offset in the current history): only a
// reset moves progress backwards.
func CheckCommit(p Partition, h Holder, t Token, offset, committed uint64) error {
	if err := checkCommitter(&p, &h, &t); err != nil {
		return err
	}
	switch {
	case offset < t.From || offset > t.Next:
		return reject(CodeNotDelivered, p, "offset %d is outside the delivered range [%d,%d]", offset, t.From, t.Next)
	case offset < p.LogStart || offset > p.HighWatermark:
		return reject(CodeOffsetOutOfRange, p, "offset %d is outside [%d,%d]", offset, p.LogStart, p.HighWatermark)
	case offset < committed:
		return reject(CodeCommitBackwards, p, "offset %d is below the committed offset %d", offset, committed)
	}
	return nil
}

// CheckReset decides an explicit seek+commit of offset under token t. A
// reset may move progress backwards, but only within the current history
// and [log start, high watermark].
func CheckReset(p Partition, h Holder, t Token, offset uint64) error {
	if err := checkCommitter(&p, &h, &t); err != nil {
		return err
	}
	if offset < p.LogStart || offset > p.HighWatermark {
		return reject(CodeOffsetOutOfRange, p, "offset %d is outside [%d,%d]", offset, p.LogStart, p.HighWatermark)
	}
	return nil
}

// CheckPosition decides whether a read may start at offset: it must lie in
// [log start, high watermark] (the high watermark itself reads nothing yet
// and is where a long poll waits).
func CheckPosition(p Partition, offset uint64) error {
	if offset < p.LogStart || offset > p.HighWatermark {
		return reject(CodeOffsetOutOfRange, p, "offset %d is outside [%d,%d]", offset, p.LogStart, p.HighWatermark)
	}
	return nil
}

// checkCommitter is CheckCurrent plus: only a named consumer or a group
// member has progress to change.
func checkCommitter(p *Partition, h *Holder, t *Token) error {
	if err := checkCurrent(p, h, t); err != nil {
		return err
	}
	if t.Kind == HolderAnonymous {
		return reject(CodeTokenMismatch, *p, "an anonymous poll's token cannot change progress")
	}
	return nil
}
