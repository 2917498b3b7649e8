package node

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

// Bearer tokens. A token's secret is "ledge_" + id + "_" + 43 characters of
// base64url (256 random bits). The node stores the id, the SHA-256 of the
// whole secret, the scopes and the topic restriction; the secret itself is
// shown once, when the token is created. The id inside the secret lets the
// node find the record without a table of hashes; the hash comparison is
// constant-time.

const (
	tokenPrefix    = "ledge_"
	tokenIDBytes   = 8
	tokenKeyBytes  = 32
	tokenRecordVer = 1
)

var keyTokens = []byte("tokens/")

// tokenRecord is a token as the node keeps it. The record is shared by the
// connections authenticated with it, so a revocation is seen by their next
// request even before the connection is closed.
type tokenRecord struct {
	info    wire.TokenInfo
	hash    [sha256.Size]byte
	revoked atomic.Bool
}

// allows reports whether the token grants want on topic. An empty topic
// asks for want on any topic (requests that name none: init producer,
// attach consumer).
func (r *tokenRecord) allows(topic string, want wire.Scope) bool {
	if !r.info.Scopes.Has(want) {
		return false
	}
	return topic == "" || r.info.Topic == wire.AllTopics || r.info.Topic == topic
}

// sees reports whether the token may see topic at all (list, describe).
func (r *tokenRecord) sees(topic string) bool {
	return r.info.Topic == wire.AllTopics || r.info.Topic == topic
}

func (r *tokenRecord) expired(now time.Time) bool {
	return r.info.ExpiresAt != 0 && now.UnixMilli() >= r.info.ExpiresAt
}

// valid returns ErrUnauthenticated when the token can no longer be used.
func (r *tokenRecord) valid(now time.Time) error {
	switch {
	case r.revoked.Load():
		return fmt.Errorf("%w: token %s was revoked", ErrUnauthenticated, r.info.ID)
	case r.expired(now):
		return fmt.Errorf("%w: token %s expired", ErrUnauthenticated, r.info.ID)
	}
	return nil
}

// tokens is the node's token registry, persisted in Metadata.
type tokens struct {
	meta owner.Metadata
	now  func() time.Time

	writeMu sync.Mutex // serializes create and revoke across their sync

	mu   sync.RWMutex
	byID map[string]*tokenRecord
}

func openTokens(meta owner.Metadata, now func() time.Time) (*tokens, error) {
	ts := &tokens{meta: meta, now: now, byID: map[string]*tokenRecord{}}
	err := meta.Scan(keyTokens, func(k, v []byte) error {
		r, revoked, err := decodeToken(v)
		if err != nil {
			return fmt.Errorf("node: token %q: %w", k[len(keyTokens):], err)
		}
		if !revoked {
			ts.byID[r.info.ID] = r
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ts, nil
}

// authenticate returns the record of secret, or ErrUnauthenticated. The
// error never repeats the secret.
func (ts *tokens) authenticate(secret string) (*tokenRecord, error) {
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
	if err := r.valid(ts.now()); err != nil {
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

// create mints a token and returns it with its secret once it is durable.
func (ts *tokens) create(ctx context.Context, label, topic string, scopes wire.Scope, expiresAt int64) (*tokenRecord, string, error) {
	switch {
	case scopes == 0:
		return nil, "", invalidArgument("a token needs at least one scope")
	case topic == "":
		return nil, "", invalidArgument(`a token needs a topic, or "*" for every topic`)
	case topic != wire.AllTopics && checkTopicName(topic) != nil:
		return nil, "", checkTopicName(topic)
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
	r := &tokenRecord{
		info: wire.TokenInfo{
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

// revoke revokes a token once the revocation is durable. Connections
// authenticated with it fail their next request; the caller closes them.
func (ts *tokens) revoke(ctx context.Context, id string) (*tokenRecord, error) {
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

// get returns the live token with that id.
func (ts *tokens) get(id string) *tokenRecord {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	return ts.byID[id]
}

// list returns the live tokens that filter accepts, by creation time.
func (ts *tokens) list(filter func(*tokenRecord) bool) []wire.TokenInfo {
	ts.mu.RLock()
	out := make([]wire.TokenInfo, 0, len(ts.byID))
	for _, r := range ts.byID {
		if filter(r) {
			out = append(out, r.info)
		}
	}
	ts.mu.RUnlock()
	slices.SortFunc(out, func(a, b wire.TokenInfo) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return out
}

func (ts *tokens) store(ctx context.Context, r *tokenRecord, revoked bool) error {
	t, err := ts.meta.Put(append(slices.Clip(keyTokens), r.info.ID...), encodeToken(r, revoked))
	if err != nil {
		return err
	}
	return ts.meta.Sync(ctx, t)
}

// Stored token, version 1 (big-endian):
//
//	version u8 | flags u8 (bit 0 revoked) | scopes u8 | created i64 | expires i64 |
//	sha256 [32] | id u16+bytes | label u16+bytes | topic u16+bytes
func encodeToken(r *tokenRecord, revoked bool) []byte {
	var flags byte
	if revoked {
		flags = 1
	}
	b := []byte{tokenRecordVer, flags, byte(r.info.Scopes)}
	b = binary.BigEndian.AppendUint64(b, uint64(r.info.CreatedAt))
	b = binary.BigEndian.AppendUint64(b, uint64(r.info.ExpiresAt))
	b = append(b, r.hash[:]...)
	for _, s := range []string{r.info.ID, r.info.Label, r.info.Topic} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	return b
}

func decodeToken(b []byte) (*tokenRecord, bool, error) {
	bad := errors.New("malformed token record")
	const fixed = 3 + 8 + 8 + sha256.Size
	if len(b) < fixed {
		return nil, false, bad
	}
	if b[0] != tokenRecordVer {
		return nil, false, fmt.Errorf("token record version %d is newer than this node knows", b[0])
	}
	r := &tokenRecord{}
	revoked := b[1]&1 != 0
	r.info.Scopes = wire.Scope(b[2])
	r.info.CreatedAt = int64(binary.BigEndian.Uint64(b[3:]))
	r.info.ExpiresAt = int64(binary.BigEndian.Uint64(b[11:]))
	copy(r.hash[:], b[19:fixed])
	b = b[fixed:]
	for _, dst := range []*string{&r.info.ID, &r.info.Label, &r.info.Topic} {
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
	if len(b) != 0 || r.info.ID == "" {
		return nil, false, bad
	}
	return r, revoked, nil
}
