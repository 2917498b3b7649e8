package tokens_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/node/tokens"
	"github.com/ledgemq/ledge/transport/wire"
)

func TestTokenLifecycle(t *testing.T) {
	meta := ownertest.NewMeta()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	reg, err := tokens.Open(meta, clock)
	if err != nil {
		t.Fatal(err)
	}
	tok, secret, err := reg.Create(t.Context(), "sensors", "temps", wire.ScopeConsume, now.Add(time.Hour).UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "ledge_"+tok.Info.ID+"_") {
		t.Fatalf("secret %q does not carry the id %s", secret, tok.Info.ID)
	}
	got, err := reg.Authenticate(secret)
	if err != nil || got.Info.ID != tok.Info.ID {
		t.Fatalf("authenticate: %v, %v", got, err)
	}
	if !got.Allows("temps", wire.ScopeConsume) || got.Allows("temps", wire.ScopeProduce) || got.Allows("other", wire.ScopeConsume) {
		t.Error("a consume token of topic temps: scopes or topic not as granted")
	}
	if !got.Sees("temps") || got.Sees("other") {
		t.Error("a token of topic temps sees other topics, or not its own")
	}
	if _, err := reg.Authenticate(secret[:len(secret)-1] + "x"); !errors.Is(err, tokens.ErrUnauthenticated) {
		t.Errorf("a wrong secret: %v, want ErrUnauthenticated", err)
	}

	// The token outlives the registry: a node reopens it.
	reg, err = tokens.Open(meta, clock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Authenticate(secret); err != nil {
		t.Fatalf("after reopening: %v", err)
	}
	if l := reg.List(func(*tokens.Token) bool { return true }); len(l) != 1 || l[0].Label != "sensors" {
		t.Fatalf("list: %+v", l)
	}

	// Past its expiry it no longer authenticates.
	now = now.Add(time.Hour)
	if _, err := reg.Authenticate(secret); !errors.Is(err, tokens.ErrUnauthenticated) {
		t.Errorf("an expired token: %v, want ErrUnauthenticated", err)
	}
}

func TestRevokedTokenFailsItsNextRequest(t *testing.T) {
	meta := ownertest.NewMeta()
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	reg, err := tokens.Open(meta, now)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := reg.Create(t.Context(), "", wire.AllTopics, wire.ScopeAdmin, 0)
	if err != nil {
		t.Fatal(err)
	}
	held, err := reg.Authenticate(secret) // a connection holds it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Revoke(t.Context(), held.Info.ID); err != nil {
		t.Fatal(err)
	}
	if err := held.Valid(now()); !errors.Is(err, tokens.ErrUnauthenticated) || !held.Revoked() {
		t.Errorf("a held token after its revocation: %v, want ErrUnauthenticated", err)
	}
	if _, err := reg.Revoke(t.Context(), held.Info.ID); !errors.Is(err, tokens.ErrUnknownToken) {
		t.Errorf("revoking it again: %v, want ErrUnknownToken", err)
	}
	reg, err = tokens.Open(meta, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Authenticate(secret); !errors.Is(err, tokens.ErrUnauthenticated) {
		t.Errorf("a revoked token after reopening: %v, want ErrUnauthenticated", err)
	}
}

func TestCreateRefusesBadTokens(t *testing.T) {
	reg, err := tokens.Open(ownertest.NewMeta(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		topic  string
		scopes wire.Scope
	}{
		{"no scope", wire.AllTopics, 0},
		{"no topic", "", wire.ScopeConsume},
		{"a topic name no topic can have", "a/b", wire.ScopeConsume},
	} {
		if _, _, err := reg.Create(t.Context(), c.name, c.topic, c.scopes, 0); wire.StatusOf(err) != wire.StatusInvalidArgument {
			t.Errorf("%s: %v, want invalid argument", c.name, err)
		}
	}
}
