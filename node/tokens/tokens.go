package tokens

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

const (
	tokenPrefix    = "ledge_"
	tokenIDBytes   = 8
	tokenKeyBytes  = 32
	tokenRecordVer = 1
)

var keyTokens = []byte("tokens/")

// Errors of the registry, which package node maps to wire statuses; the
// comment says what a client does next.
var (
	// ErrUnauthenticated: the token is unknown, expired or revoked (give
	// up: authenticate with another token).
	ErrUnauthenticated = errors.New("tokens: unauthenticated")
	// ErrUnknownToken: a revocation named a token that does not exist
	// (give up).
	ErrUnknownToken = errors.New("tokens: unknown token")
)

// Revoked reports whether the token was revoked since it was read.
func (r *Token) Revoked() bool { return r.revoked.Load() }

// invalidArgument is a request value the registry refuses.
func invalidArgument(msg string) error {
	return &wire.Error{Status: wire.StatusInvalidArgument, Message: msg}
}

// Token is a token as the node keeps it. The record is shared by the
// connections authenticated with it, so a revocation is seen by their next
// request even before the connection is closed.
type Token struct {
	Info    wire.TokenInfo // never changed once the token exists
	hash    [sha256.Size]byte
	revoked atomic.Bool
}

// Allows reports whether the token grants want on topic. An empty topic
// asks for want on any topic (requests that name none: init producer,
// attach consumer).
func (r *Token) Allows(topic string, want wire.Scope) bool {
	if !r.Info.Scopes.Has(want) {
		return false
	}
	return topic == "" || r.Info.Topic == wire.AllTopics || r.Info.Topic == topic
}

// Sees reports whether the token may see topic at all (list, describe).
func (r *Token) Sees(topic string) bool {
	return r.Info.Topic == wire.AllTopics || r.Info.Topic == topic
}

func (r *Token) expired(now time.Time) bool {
	return r.Info.ExpiresAt != 0 && now.UnixMilli() >= r.Info.ExpiresAt
}

// Valid returns ErrUnauthenticated when the token can no longer be used.
func (r *Token) Valid(now time.Time) error {
	switch {
	case r.revoked.Load():
		return fmt.Errorf("%w: token %s was revoked", ErrUnauthenticated, r.Info.ID)
	case r.expired(now):
		return fmt.Errorf("%w: token %s expired", ErrUnauthenticated, r.Info.ID)
	}
	return nil
}

// Registry is the node's token registry, persisted in Metadata.
type Registry struct {
	meta owner.Metadata
	now  func() time.Time

	writeMu sync.Mutex // serializes create and revoke across their sync

	mu   sync.RWMutex
	byID map[string]*Token
}

// Open reads the tokens stored in meta; now is the clock of expiries.
func Open(meta owner.Metadata, now func() time.Time) (*Registry, error) {
	ts := &Registry{meta: meta, now: now, byID: map[string]*Token{}}
	err := meta.Scan(keyTokens, func(k, v []byte) error {
		r, revoked, err := decodeToken(v)
		if err != nil {
			return fmt.Errorf("tokens: token %q: %w", k[len(keyTokens):], err)
		}
		if !revoked {
			ts.byID[r.Info.ID] = r
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ts, nil
}

// Authenticate returns the record of secret, or ErrUnauthenticated. The
// error never repeats the secret.
func (ts *Registry) Authenticate(secret string) (*Token, error) {
	id, ok := tokenID(secret)
	if !ok {
		return nil, fmt.Errorf("%w: not a ledge token", ErrUnauthenticated)
	}
	ts.mu.RLock()
	r := ts.byID[id]
	ts.mu.RUnlock()
	sum := sha256.Sum256([]byte(secret))
	if r == nil || subtle.ConstantTimeCompare(sum[:], r.hash[:]) != 1 {
		return nil, fmt.Errorf("%w: unknown token", ErrUnauthenticated)
	}
	if err := r.Valid(ts.now()); err != nil {
		return nil, err
	}
	return r, nil
}

// tokenID extracts the id from a secret.
func tokenID(secret string) (string, bool) {
	rest, ok := strings.CutPrefix(secret, tokenPrefix)
	if !ok {
		return "", false
	}
	id, key, ok := strings.Cut(rest, "_")
	if !ok || len(id) != 2*tokenIDBytes || len(key) != base64.RawURLEncoding.EncodedLen(tokenKeyBytes) {
		return "", false
	}
	if _, err := hex.DecodeString(id); err != nil {
		return "", false
	}
	return id, true
}

// Create mints a token and returns it with its secret once it is durable.
func (ts *Registry) Create(ctx context.Context, label, topic string, scopes wire.Scope, expiresAt int64) (*Token, string, error) {
	switch {
	case scopes == 0:
		return nil, "", invalidArgument("a token needs at least one scope")
	case topic == "":
		return nil, "", invalidArgument(`a token needs a topic, or "*" for every topic`)
	case topic != wire.AllTopics && wire.CheckTopicName(topic) != nil:
		return nil, "", wire.CheckTopicName(topic)
	case expiresAt != 0 && expiresAt <= ts.now().UnixMilli():
		return nil, "", invalidArgument("the token's expiry is in the past")
	}
	var idb [tokenIDBytes]byte
	var key [tokenKeyBytes]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return nil, "", err
	}
	if _, err := rand.Read(key[:]); err != nil {
		return nil, "", err
	}
	id := hex.EncodeToString(idb[:])
	secret := tokenPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(key[:])
	r := &Token{
		Info: wire.TokenInfo{
			ID: id, Label: label, Topic: topic, Scopes: scopes,
			CreatedAt: ts.now().UnixMilli(), ExpiresAt: expiresAt,
		},
		hash: sha256.Sum256([]byte(secret)),
	}
	ts.writeMu.Lock()
	defer ts.writeMu.Unlock()
	if err := ts.store(ctx, r, false); err != nil {
		return nil, "", err
	}
	ts.mu.Lock()
	ts.byID[id] = r
	ts.mu.Unlock()
	return r, secret, nil
}

// Revoke revokes a token once the revocation is durable. Connections
// authenticated with it fail their next request; the caller closes them.
func (ts *Registry) Revoke(ctx context.Context, id string) (*Token, error) {
	ts.writeMu.Lock()
	defer ts.writeMu.Unlock()
	ts.mu.RLock()
	r := ts.byID[id]
	ts.mu.RUnlock()
	if r == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownToken, id)
	}
	if err := ts.store(ctx, r, true); err != nil {
		return nil, err
	}
	r.revoked.Store(true)
	ts.mu.Lock()
	delete(ts.byID, id)
	ts.mu.Unlock()
	return r, nil
}

// Get returns the live token with that id.
func (ts *Registry) Get(id string) *Token {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	return ts.byID[id]
}

// List returns the live tokens that filter accepts, by creation time.
func (ts *Registry) List(filter func(*Token) bool) []wire.TokenInfo {
	ts.mu.RLock()
	out := make([]wire.TokenInfo, 0, len(ts.byID))
	for _, r := range ts.byID {
		if filter(r) {
			out = append(out, r.Info)
		}
	}
	ts.mu.RUnlock()
	slices.SortFunc(out, func(a, b wire.TokenInfo) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return out
}

func (ts *Registry) store(ctx context.Context, r *Token, revoked bool) error {
	t, err := ts.meta.Put(append(slices.Clip(keyTokens), r.Info.ID...), encodeToken(r, revoked))
	if err != nil {
		return err
	}
	return ts.meta.Sync(ctx, t)
}

// Stored token, version 1 (big-endian):
//
//	version u8 | flags u8 (bit 0 revoked) | scopes u8 | created i64 | expires i64 |
//	sha256 [32] | id u16+bytes | label u16+bytes | topic u16+bytes
func encodeToken(r *Token, revoked bool) []byte {
	var flags byte
	if revoked {
		flags = 1
	}
	b := []byte{tokenRecordVer, flags, byte(r.Info.Scopes)}
	b = binary.BigEndian.AppendUint64(b, uint64(r.Info.CreatedAt))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Info.ExpiresAt))
	b = append(b, r.hash[:]...)
	for _, s := range []string{r.Info.ID, r.Info.Label, r.Info.Topic} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	return b
}

func decodeToken(b []byte) (*Token, bool, error) {
	bad := errors.New("malformed token record")
	const fixed = 3 + 8 + 8 + sha256.Size
	if len(b) < fixed {
		return nil, false, bad
	}
	if b[0] != tokenRecordVer {
		return nil, false, fmt.Errorf("token record version %d is newer than this node knows", b[0])
	}
	r := &Token{}
	revoked := b[1]&1 != 0
	r.Info.Scopes = wire.Scope(b[2])
	r.Info.CreatedAt = int64(binary.BigEndian.Uint64(b[3:]))
	r.Info.ExpiresAt = int64(binary.BigEndian.Uint64(b[11:]))
	copy(r.hash[:], b[19:fixed])
	b = b[fixed:]
	for _, dst := range []*string{&r.Info.ID, &r.Info.Label, &r.Info.Topic} {
		if len(b) < 2 {
			return nil, false, bad
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return nil, false, bad
		}
		*dst = string(b[2 : 2+n])
		b = b[2+n:]
	}
	if len(b) != 0 || r.Info.ID == "" {
		return nil, false, bad
	}
	return r, revoked, nil
}
