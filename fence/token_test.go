package fence

import (
	"bytes"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

func genToken() *rapid.Generator[Token] {
	return rapid.Custom(func(t *rapid.T) Token {
		var tok Token
		copy(tok.Topic[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "topic"))
		tok.Partition = rapid.Uint32().Draw(t, "partition")
		tok.History = HistoryEpoch(rapid.Uint64().Draw(t, "history"))
		tok.Kind = HolderKind(rapid.IntRange(1, int(holderEnd)-1).Draw(t, "kind"))
		tok.Consumer = rapid.Uint64().Draw(t, "consumer")
		tok.Session = SessionEpoch(rapid.Uint64().Draw(t, "session"))
		tok.Member = rapid.Uint64().Draw(t, "member")
		tok.MemberEpoch = MemberEpoch(rapid.Uint64().Draw(t, "memberEpoch"))
		tok.AssignmentEpoch = MemberEpoch(rapid.Uint64().Draw(t, "assignmentEpoch"))
		tok.From = rapid.Uint64().Draw(t, "from")
		tok.Next = rapid.Uint64Min(tok.From).Draw(t, "next")
		return tok
	})
}

// covers: G16
func TestTokenRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		tok := genToken().Draw(rt, "token")
		b, _ := tok.MarshalBinary()
		if len(b) != TokenSize || b[0] != TokenVersion {
			rt.Fatalf("encoded %d bytes, version %d", len(b), b[0])
		}
		ab, _ := tok.AppendBinary([]byte{0xff})
		if !bytes.Equal(ab[1:], b) {
			rt.Fatal("AppendBinary and MarshalBinary differ")
		}
		got, err := UnmarshalToken(b)
		if err != nil || got != tok {
			rt.Fatalf("round trip: %v %v != %v", err, got, tok)
		}
	})
}

// covers: G16
func TestTokenRejectsMalformed(t *testing.T) {
	good, _ := Issue(part(), consumer(1), 12).Through(15).MarshalBinary()
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := map[string][]byte{
		"short":           good[:TokenSize-1],
		"long":            append(bytes.Clone(good), 0),
		"newer version":   mut(func(b []byte) []byte { b[0] = 2; return b }),
		"zero version":    make([]byte, TokenSize),
		"holder none":     mut(func(b []byte) []byte { b[1] = 0; return b }),
		"holder unknown":  mut(func(b []byte) []byte { b[1] = 9; return b }),
		"reserved set":    mut(func(b []byte) []byte { b[3] = 1; return b }),
		"inverted range":  mut(func(b []byte) []byte { b[72] = 0xff; return b }),
		"one byte":        {1},
		"version only ok": {TokenVersion},
	}
	for name, b := range cases {
		if _, err := UnmarshalToken(b); !errors.Is(err, ErrMalformedToken) {
			t.Errorf("%s: got %v, want ErrMalformedToken", name, err)
		}
	}
	if tok, err := UnmarshalToken(nil); err != nil || !tok.IsZero() {
		t.Fatalf("empty bytes must decode to no token, got %v %v", tok, err)
	}
}

func FuzzUnmarshalToken(f *testing.F) {
	good, _ := Issue(part(), member(3, 2), 1).Through(9).MarshalBinary()
	f.Add(good)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := UnmarshalToken(b)
		if err != nil {
			return
		}
		again, _ := tok.MarshalBinary()
		if len(b) != 0 && !bytes.Equal(again, b) {
			t.Fatalf("decoded token re-encodes differently")
		}
	})
}
