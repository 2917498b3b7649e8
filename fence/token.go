package fence

import (
	"encoding/binary"
	"fmt"
)

// HolderKind says on whose behalf a token was issued.
type HolderKind uint8

const (
	// HolderNone marks the zero Token: no token at all.
	HolderNone HolderKind = iota
	// HolderAnonymous: a poll that names no consumer (reading by offset).
	// Its token authorizes the reply only; it can commit nothing.
	HolderAnonymous
	// HolderConsumer: a named individual consumer in a session.
	HolderConsumer
	// HolderMember: a member of a consumer group.
	HolderMember
	holderEnd
)

// String returns the kind's name.
func (k HolderKind) String() string {
	switch k {
	case HolderNone:
		return "none"
	case HolderAnonymous:
		return "anonymous"
	case HolderConsumer:
		return "consumer"
	case HolderMember:
		return "member"
	}
	return "unknown"
}

// Token is the identity of the world a piece of work was created in: the
// topic creation, the partition, its history epoch, the holder's session or
// group membership, and the range [From, Next) a poll delivered. Poll
// results carry one; commits, resets and state writes must present one.
// It is a plain value: comparable, no pointers, fixed size when encoded.
type Token struct {
	Topic     TopicID
	Partition uint32
	History   HistoryEpoch
	Kind      HolderKind
	// Consumer is NameHash of the consumer name (HolderConsumer) or of the
	// group name (HolderMember).
	Consumer uint64
	// Session is the consumer's session epoch when the token was issued.
	Session SessionEpoch
	// Member is NameHash of the member id (HolderMember).
	Member uint64
	// MemberEpoch is the member's epoch when the token was issued: the
	// request epoch of everything derived from it.
	MemberEpoch MemberEpoch
	// AssignmentEpoch is the member's assignment epoch of the partition
	// when the token was issued.
	AssignmentEpoch MemberEpoch
	// From and Next bound the delivered offsets: [From, Next). Next is the
	// position to poll from next; a commit derived from the token may
	// commit any offset in [From, Next].
	From, Next uint64
}

// IsZero reports whether t is the zero Token (no token).
func (t Token) IsZero() bool { return t.Kind == HolderNone }

// String describes the token for logs and test output.
func (t Token) String() string {
	if t.IsZero() {
		return "token(none)"
	}
	s := fmt.Sprintf("token(topic=%s p=%d h=%d %s", t.Topic.String()[:8], t.Partition, t.History, t.Kind)
	switch t.Kind {
	case HolderConsumer:
		s += fmt.Sprintf(" session=%d", t.Session)
	case HolderMember:
		s += fmt.Sprintf(" member=%x epoch=%d assigned=%d", t.Member, t.MemberEpoch, t.AssignmentEpoch)
	}
	return s + fmt.Sprintf(" [%d,%d))", t.From, t.Next)
}

// TokenVersion is the version byte of the encoding MarshalBinary writes.
const TokenVersion = 1

// TokenSize is the length of an encoded token of TokenVersion.
//
//	off size field (little-endian)
//	 0   1   version (1)
//	 1   1   holder kind
//	 2   2   reserved, zero
//	 4   4   partition
//	 8  16   topic id
//	24   8   history epoch
//	32   8   consumer (name hash)
//	40   8   session epoch
//	48   8   member (name hash)
//	56   8   member epoch
//	64   8   assignment epoch
//	72   8   from
//	80   8   next
const TokenSize = 88

// AppendBinary appends the token's encoding to b.
func (t Token) AppendBinary(b []byte) ([]byte, error) {
	var buf [TokenSize]byte
	t.put(&buf)
	return append(b, buf[:]...), nil
}

// MarshalBinary returns the token's TokenSize-byte encoding.
func (t Token) MarshalBinary() ([]byte, error) {
	b := make([]byte, TokenSize)
	t.put((*[TokenSize]byte)(b))
	return b, nil
}

func (t Token) put(b *[TokenSize]byte) {
	le := binary.LittleEndian
	b[0] = TokenVersion
	b[1] = byte(t.Kind)
	b[2], b[3] = 0, 0
	le.PutUint32(b[4:], t.Partition)
	copy(b[8:24], t.Topic[:])
	le.PutUint64(b[24:], uint64(t.History))
	le.PutUint64(b[32:], t.Consumer)
	le.PutUint64(b[40:], uint64(t.Session))
	le.PutUint64(b[48:], t.Member)
	le.PutUint64(b[56:], uint64(t.MemberEpoch))
	le.PutUint64(b[64:], uint64(t.AssignmentEpoch))
	le.PutUint64(b[72:], t.From)
	le.PutUint64(b[80:], t.Next)
}

// UnmarshalBinary decodes a token. An empty slice decodes to the zero Token
// (no token). Anything else must be exactly one token of a known version
// with From <= Next; otherwise the error is ErrMalformedToken.
func (t *Token) UnmarshalBinary(b []byte) error {
	if len(b) == 0 {
		*t = Token{}
		return nil
	}
	if b[0] != TokenVersion {
		return errMalformed(fmt.Sprintf("unsupported token version %d", b[0]))
	}
	if len(b) != TokenSize {
		return errMalformed(fmt.Sprintf("token is %d bytes, want %d", len(b), TokenSize))
	}
	le := binary.LittleEndian
	var d Token
	d.Kind = HolderKind(b[1])
	d.Partition = le.Uint32(b[4:])
	copy(d.Topic[:], b[8:24])
	d.History = HistoryEpoch(le.Uint64(b[24:]))
	d.Consumer = le.Uint64(b[32:])
	d.Session = SessionEpoch(le.Uint64(b[40:]))
	d.Member = le.Uint64(b[48:])
	d.MemberEpoch = MemberEpoch(le.Uint64(b[56:]))
	d.AssignmentEpoch = MemberEpoch(le.Uint64(b[64:]))
	d.From = le.Uint64(b[72:])
	d.Next = le.Uint64(b[80:])
	switch {
	case b[2] != 0 || b[3] != 0:
		return errMalformed("reserved bytes are not zero")
	case d.Kind == HolderNone || d.Kind >= holderEnd:
		return errMalformed(fmt.Sprintf("holder kind %d", b[1]))
	case d.From > d.Next:
		return errMalformed(fmt.Sprintf("range [%d,%d) is inverted", d.From, d.Next))
	}
	*t = d
	return nil
}

// UnmarshalToken decodes a token; see Token.UnmarshalBinary.
func UnmarshalToken(b []byte) (Token, error) {
	var t Token
	err := t.UnmarshalBinary(b)
	return t, err
}

func errMalformed(detail string) error {
	return &Error{Code: CodeMalformedToken, Action: CodeMalformedToken.Action(), Detail: detail}
}
