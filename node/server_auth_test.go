package node

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// keepsServing checks that a client is still served: a produce and a poll
// on topic.
func keepsServing(t *testing.T, c *client, topic string) {
	t.Helper()
	rep, err := c.produce(c.main, topic, 0, batch(t, 0, 0, 0, "still here"))
	if err != nil {
		t.Fatalf("the bystander was not served: %v", err)
	}
	got := c.pollOne(c.main, wire.Consumer{}, topic, wire.Position{Mode: wire.PositionOffset, Offset: rep.BaseOffset}, 0)
	if vs := values(t, got.Batches); len(vs) == 0 || !strings.HasSuffix(vs[0], ":still here") {
		t.Fatalf("the bystander read %v", vs)
	}
}

func createToken(t *testing.T, admin *client, topic string, scopes wire.Scope) wire.CreateTokenReply {
	t.Helper()
	var rep wire.CreateTokenReply
	admin.mustCall(&wire.CreateTokenRequest{Label: "test", Topic: topic, Scopes: scopes}, &rep)
	return rep
}

func TestE2EAuthentication(t *testing.T) {
	tn := startNode(t, nil, nil)
	admin := tn.mustDial(t, tn.admin)
	admin.createTopic("t", wire.TopicConfig{})
	admin.createTopic("other", wire.TopicConfig{})

	t.Run("bad token", func(t *testing.T) {
		for _, tok := range []string{"", "nonsense", "ledge_0123456789abcdef_" + strings.Repeat("A", 43), tn.admin + "x"} {
			_, err := tn.dial(t, tok)
			if !errors.Is(err, quic.ErrUnauthenticated) || quic.IsRetryable(err) {
				t.Errorf("token %q: err = %v, want a non-retryable ErrUnauthenticated", tok, err)
			}
		}
		keepsServing(t, admin, "t")
	})

	t.Run("wrong scope", func(t *testing.T) {
		tok := createToken(t, admin, "t", wire.ScopeConsume)
		c := tn.mustDial(t, tok.Secret)
		_, err := c.produce(c.main, "t", 0, batch(t, 0, 0, 0, "x"))
		if statusOfErr(err) != wire.StatusForbidden {
			t.Errorf("produce with a consume token: %v, want %s", err, wire.StatusForbidden)
		}
		var rep wire.PollReply
		err = c.call(c.main, &wire.PollRequest{Partitions: []wire.PollPartition{{Topic: "other", Position: wire.Position{Mode: wire.PositionFirst}}}}, &rep)
		if statusOfErr(err) != wire.StatusForbidden {
			t.Errorf("poll of another topic: %v, want %s", err, wire.StatusForbidden)
		}
		for _, req := range []wire.Message{
			&wire.CreateTopicRequest{Name: "t2"},
			&wire.ListTokensRequest{},
			&wire.PurgeRequest{Topic: "t"},
		} {
			if err := c.call(c.main, req, replyOf(req)); statusOfErr(err) != wire.StatusForbidden {
				t.Errorf("%s with a consume token: %v, want %s", req.Kind(), err, wire.StatusForbidden)
			}
		}
		var list wire.ListTopicsReply
		c.mustCall(&wire.ListTopicsRequest{}, &list)
		if len(list.Topics) != 1 || list.Topics[0].Name != "t" {
			t.Errorf("a token of topic t lists %+v", list.Topics)
		}
		// What it may do, it does.
		if p := c.pollOne(c.main, wire.Consumer{}, "t", wire.Position{Mode: wire.PositionFirst}, 0); p.Status != wire.StatusOK {
			t.Errorf("poll with a consume token: %s", p.Status)
		}
		keepsServing(t, admin, "t")
	})

	t.Run("revoked token", func(t *testing.T) {
		tok := createToken(t, admin, wire.AllTopics, wire.ScopeProduce|wire.ScopeConsume)
		victim := tn.mustDial(t, tok.Secret)
		if _, err := victim.produce(victim.main, "t", 0, batch(t, 0, 0, 0, "before")); err != nil {
			t.Fatal(err)
		}
		var list wire.ListTokensReply
		admin.mustCall(&wire.ListTokensRequest{}, &list)
		if !hasToken(list.Tokens, tok.Token.ID) {
			t.Fatalf("token %s not listed", tok.Token.ID)
		}
		admin.mustCall(&wire.RevokeTokenRequest{ID: tok.Token.ID}, &wire.RevokeTokenReply{})
		select {
		case <-victim.conn.Context().Done():
		case <-safetyContext(t).Done():
			t.Fatal("the revoked token's connection is still open")
		}
		if err := victim.conn.Err(); !errors.Is(err, quic.ErrTokenRevoked) {
			t.Errorf("connection closed with %v, want ErrTokenRevoked", err)
		}
		if _, err := tn.dial(t, tok.Secret); !errors.Is(err, quic.ErrUnauthenticated) {
			t.Errorf("dial with the revoked token: %v, want ErrUnauthenticated", err)
		}
		admin.mustCall(&wire.ListTokensRequest{}, &list)
		if hasToken(list.Tokens, tok.Token.ID) {
			t.Errorf("revoked token %s still listed", tok.Token.ID)
		}
		if err := admin.call(admin.main, &wire.RevokeTokenRequest{ID: tok.Token.ID}, &wire.RevokeTokenReply{}); statusOfErr(err) != wire.StatusUnknownToken {
			t.Errorf("revoking twice: %v, want %s", err, wire.StatusUnknownToken)
		}
		keepsServing(t, admin, "t")
	})

	t.Run("topic admin cannot escalate", func(t *testing.T) {
		tok := createToken(t, admin, "t", wire.ScopeAdmin|wire.ScopeConsume)
		c := tn.mustDial(t, tok.Secret)
		for _, req := range []*wire.CreateTokenRequest{
			{Topic: wire.AllTopics, Scopes: wire.ScopeConsume},
			{Topic: "t", Scopes: wire.ScopeProduce},
		} {
			if err := c.call(c.main, req, &wire.CreateTokenReply{}); statusOfErr(err) != wire.StatusForbidden {
				t.Errorf("create %+v: %v, want %s", req, err, wire.StatusForbidden)
			}
		}
		c.mustCall(&wire.CreateTokenRequest{Topic: "t", Scopes: wire.ScopeConsume}, &wire.CreateTokenReply{})
	})
}

func hasToken(ts []wire.TokenInfo, id string) bool {
	for _, t := range ts {
		if t.ID == id {
			return true
		}
	}
	return false
}

// replyOf returns an empty reply message for req's kind.
func replyOf(req wire.Message) wire.Message {
	switch req.Kind() {
	case wire.KindCreateTopic:
		return &wire.CreateTopicReply{}
	case wire.KindListTokens:
		return &wire.ListTokensReply{}
	case wire.KindPurge:
		return &wire.PurgeReply{}
	}
	panic("no reply type for " + req.Kind().String())
}

func TestE2EOversizedFrame(t *testing.T) {
	const limit = 64 << 10
	tn := startNode(t, nil, func(c *Config) { c.Transport.MaxFrameSize = limit })
	admin := tn.mustDial(t, tn.admin)
	admin.createTopic("t", wire.TopicConfig{})
	bystander := tn.mustDial(t, tn.admin)

	c := tn.mustDial(t, tn.admin)
	s := c.stream()
	small := c.send(s, &wire.ProduceRequest{Topic: "t", Batch: batch(t, 0, 0, 0, "small")})
	big := c.send(s, &wire.ProduceRequest{Topic: "t", Batch: batch(t, 0, 0, 0, strings.Repeat("x", limit))})
	if err := await(t, small, &wire.ProduceReply{}); err != nil {
		t.Errorf("the request before the oversized one: %v", err)
	}
	err := await(t, big, &wire.ProduceReply{})
	if !errors.Is(err, quic.ErrFrameTooLarge) || quic.IsRetryable(err) {
		t.Errorf("oversized frame: %v, want a non-retryable ErrFrameTooLarge", err)
	}
	// The connection and the other clients go on.
	if _, err := c.produce(c.main, "t", 0, batch(t, 0, 0, 0, "same connection")); err != nil {
		t.Errorf("same connection, another stream: %v", err)
	}
	keepsServing(t, bystander, "t")
	if n := tn.Stats().FramesTooLarge; n != 1 {
		t.Errorf("FramesTooLarge = %d, want 1", n)
	}
}

func TestE2EGarbageFrames(t *testing.T) {
	tn := startNode(t, nil, nil)
	admin := tn.mustDial(t, tn.admin)
	admin.createTopic("t", wire.TopicConfig{})
	c := tn.mustDial(t, tn.admin)
	s := c.stream()

	frame := func(version uint8, flags wire.FrameFlags, kind wire.Kind, body []byte) []byte {
		f, err := wire.AppendFrame(nil, wire.FrameHeader{Version: version, Flags: flags, Kind: kind, ID: 77}, body)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	rng := rand.New(rand.NewPCG(4, 2))
	noise := make([]byte, 300)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		want  wire.Status
	}{
		{"unknown kind", frame(1, 0, 0x3F, nil), wire.StatusUnknownKind},
		{"reserved kind", frame(1, 0, wire.Kind(0x0052), nil), wire.StatusUnknownKind},
		{"newer version", frame(9, 0, wire.KindListTopics, nil), wire.StatusUnsupportedVersion},
		{"reply flag", frame(1, wire.FlagReply, wire.KindListTopics, nil), wire.StatusMalformedRequest},
		{"unknown flags", frame(1, 0x80, wire.KindListTopics, nil), wire.StatusMalformedRequest},
		{"truncated body", frame(1, 0, wire.KindProduce, []byte{5, 0, 't'}), wire.StatusMalformedRequest},
		{"trailing bytes", frame(1, 0, wire.KindListTopics, []byte{0}), wire.StatusMalformedRequest},
		{"noise body", frame(1, 0, wire.KindPoll, noise), wire.StatusMalformedRequest},
		{"noise batch", mustFrame(t, &wire.ProduceRequest{Topic: "t", Batch: noise}), wire.StatusInvalidBatch},
		{"second authenticate", mustFrame(t, &wire.AuthenticateRequest{Token: tn.admin}), wire.StatusInvalidArgument},
	} {
		reply, err := s.Do(safetyContext(t), tc.frame)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		h, size, err := wire.ParseFrameHeader(reply, len(reply))
		if err != nil {
			t.Fatalf("%s: reply: %v", tc.name, err)
		}
		status, msg, _, err := wire.ParseReply(reply[len(reply)-size:])
		if err != nil || status != tc.want || !h.IsReply() || msg == "" {
			t.Errorf("%s: status %s (%q), err %v; want %s with a message", tc.name, status, msg, err, tc.want)
		}
	}
	// The same stream is still served after the garbage.
	var list wire.ListTopicsReply
	if err := c.call(s, &wire.ListTopicsRequest{}, &list); err != nil || len(list.Topics) != 1 {
		t.Fatalf("after the garbage: %v, %+v", err, list.Topics)
	}
	keepsServing(t, admin, "t")
}

func mustFrame(t *testing.T, m wire.Message) []byte {
	t.Helper()
	f, err := wire.AppendRequest(nil, 1, m)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestE2EGarbageDatagrams(t *testing.T) {
	tn := startNode(t, nil, nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{})
	junk, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer junk.Close()
	to, err := net.ResolveUDPAddr("udp", tn.Addr())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	buf := make([]byte, 1400)
	for i := range 2000 {
		n := 1 + rng.IntN(len(buf))
		for j := range buf[:n] {
			buf[j] = byte(rng.Uint32())
		}
		if i%2 == 0 { // a QUIC v1 long-header look-alike
			buf[0] = 0xc0 | buf[0]&0x3f
			if n >= 5 {
				binary.BigEndian.PutUint32(buf[1:5], 1)
			}
		}
		if _, err := junk.WriteTo(buf[:n], to); err != nil {
			t.Fatal(err)
		}
	}
	keepsServing(t, c, "t")
	keepsServing(t, tn.mustDial(t, tn.admin), "t")
}
