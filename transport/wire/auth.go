package wire

// AuthenticateRequest presents a bearer token. It is the first request of
// a connection; until it succeeds every other request is answered with
// StatusUnauthenticated.
//
//	token str16 (at most MaxAuthTokenLen bytes) | [flags u8]
//
// Flags is an optional last field, absent when zero: a node older than it
// refuses the request as malformed, and the client authenticates again
// without it.
type AuthenticateRequest struct {
	Token string
	Flags AuthFlags
}

// Kind implements Message.
func (*AuthenticateRequest) Kind() Kind { return KindAuthenticate }

// Encode implements Message.
func (m *AuthenticateRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "authenticate")
	w.str16(m.Token, MaxAuthTokenLen, "token")
	if m.Flags != 0 {
		w.enum(uint8(m.Flags), uint8(knownAuthFlags), "authenticate flags")
	}
	return w.result()
}

// Decode implements Message.
func (m *AuthenticateRequest) Decode(b []byte) error {
	r := newFieldReader(b, "authenticate")
	r.str16(&m.Token, MaxAuthTokenLen, "token")
	m.Flags = 0
	if r.err == nil && r.left() > 0 {
		// Bits a later client sets name fields this node does not send:
		// kept, and ignored.
		if m.Flags = AuthFlags(r.u8("authenticate flags")); m.Flags == 0 {
			r.fail("flags present and zero")
		}
	}
	return r.finish()
}

// AuthenticateReply says what the token grants and the node's limits.
//
//	token id str16 | topic str16 | scopes u8 | max frame size u32 | node version str16
type AuthenticateReply struct {
	TokenID string
	// Topic is the topic the token's scopes apply to, or AllTopics.
	Topic  string
	Scopes Scope
	// MaxFrameSize is the largest frame body the node accepts.
	MaxFrameSize uint32
	// NodeVersion is the node's software version, for people.
	NodeVersion string
}

// Kind implements Message.
func (*AuthenticateReply) Kind() Kind { return KindAuthenticate }

// Encode implements Message.
func (m *AuthenticateReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "authenticate reply")
	w.str16(m.TokenID, MaxNameLen, "token id")
	w.str16(m.Topic, MaxNameLen, "topic")
	w.scope(m.Scopes)
	w.u32(m.MaxFrameSize)
	w.str16(m.NodeVersion, MaxNameLen, "node version")
	return w.result()
}

// Decode implements Message.
func (m *AuthenticateReply) Decode(b []byte) error {
	r := newFieldReader(b, "authenticate reply")
	r.str16(&m.TokenID, MaxNameLen, "token id")
	r.str16(&m.Topic, MaxNameLen, "topic")
	m.Scopes = r.scope()
	m.MaxFrameSize = r.u32("max frame size")
	r.str16(&m.NodeVersion, MaxNameLen, "node version")
	return r.finish()
}

// TokenInfo describes a token without its secret.
//
//	id str16 | label str16 | topic str16 | scopes u8 | created at i64 | expires at i64
type TokenInfo struct {
	ID    string
	Label string
	// Topic is the topic the scopes apply to, or AllTopics.
	Topic  string
	Scopes Scope
	// CreatedAt and ExpiresAt are unix milliseconds; ExpiresAt 0 never
	// expires.
	CreatedAt int64
	ExpiresAt int64
}

const tokenInfoMinSize = 2 + 2 + 2 + 1 + 8 + 8

func (t *TokenInfo) put(w *fieldWriter) {
	w.str16(t.ID, MaxNameLen, "token id")
	w.str16(t.Label, MaxNameLen, "label")
	w.str16(t.Topic, MaxNameLen, "topic")
	w.scope(t.Scopes)
	w.i64(t.CreatedAt)
	w.i64(t.ExpiresAt)
}

func (t *TokenInfo) get(r *fieldReader) {
	r.str16(&t.ID, MaxNameLen, "token id")
	r.str16(&t.Label, MaxNameLen, "label")
	r.str16(&t.Topic, MaxNameLen, "topic")
	t.Scopes = r.scope()
	t.CreatedAt = r.i64("created at")
	t.ExpiresAt = r.i64("expires at")
}

// CreateTokenRequest creates a token granting Scopes on Topic (or on every
// topic with AllTopics). It needs the admin scope.
//
//	label str16 | topic str16 | scopes u8 | expires at i64 (unix ms, 0: never)
type CreateTokenRequest struct {
	Label     string
	Topic     string
	Scopes    Scope
	ExpiresAt int64
}

// Kind implements Message.
func (*CreateTokenRequest) Kind() Kind { return KindCreateToken }

// Encode implements Message.
func (m *CreateTokenRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "create-token")
	w.str16(m.Label, MaxNameLen, "label")
	w.str16(m.Topic, MaxNameLen, "topic")
	w.scope(m.Scopes)
	w.i64(m.ExpiresAt)
	return w.result()
}

// Decode implements Message.
func (m *CreateTokenRequest) Decode(b []byte) error {
	r := newFieldReader(b, "create-token")
	r.str16(&m.Label, MaxNameLen, "label")
	r.str16(&m.Topic, MaxNameLen, "topic")
	m.Scopes = r.scope()
	m.ExpiresAt = r.i64("expires at")
	return r.finish()
}

// CreateTokenReply carries the new token and its secret. The node stores
// only a hash: the secret is shown this once.
//
//	token info | secret str16
type CreateTokenReply struct {
	Token  TokenInfo
	Secret string
}

// Kind implements Message.
func (*CreateTokenReply) Kind() Kind { return KindCreateToken }

// Encode implements Message.
func (m *CreateTokenReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "create-token reply")
	m.Token.put(&w)
	w.str16(m.Secret, MaxAuthTokenLen, "secret")
	return w.result()
}

// Decode implements Message.
func (m *CreateTokenReply) Decode(b []byte) error {
	r := newFieldReader(b, "create-token reply")
	m.Token.get(&r)
	r.str16(&m.Secret, MaxAuthTokenLen, "secret")
	return r.finish()
}

// ListTokensRequest is empty; it needs the admin scope.
type ListTokensRequest struct{}

// Kind implements Message.
func (*ListTokensRequest) Kind() Kind { return KindListTokens }

// Encode implements Message.
func (*ListTokensRequest) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*ListTokensRequest) Decode(b []byte) error {
	r := newFieldReader(b, "list-tokens")
	return r.finish()
}

// ListTokensReply lists tokens without their secrets.
//
//	count u32 | token info × count
type ListTokensReply struct {
	Tokens []TokenInfo
}

// Kind implements Message.
func (*ListTokensReply) Kind() Kind { return KindListTokens }

// Encode implements Message.
func (m *ListTokensReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "list-tokens reply")
	w.count(len(m.Tokens), "tokens")
	for i := range m.Tokens {
		m.Tokens[i].put(&w)
	}
	return w.result()
}

// Decode implements Message.
func (m *ListTokensReply) Decode(b []byte) error {
	r := newFieldReader(b, "list-tokens reply")
	m.Tokens = resize(m.Tokens, r.count(tokenInfoMinSize, "tokens"))
	for i := range m.Tokens {
		m.Tokens[i].get(&r)
	}
	return r.finish()
}

// RevokeTokenRequest revokes a token by id; the node closes the
// connections authenticated with it.
//
//	id str16
type RevokeTokenRequest struct {
	ID string
}

// Kind implements Message.
func (*RevokeTokenRequest) Kind() Kind { return KindRevokeToken }

// Encode implements Message.
func (m *RevokeTokenRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "revoke-token")
	w.str16(m.ID, MaxNameLen, "token id")
	return w.result()
}

// Decode implements Message.
func (m *RevokeTokenRequest) Decode(b []byte) error {
	r := newFieldReader(b, "revoke-token")
	r.str16(&m.ID, MaxNameLen, "token id")
	return r.finish()
}

// RevokeTokenReply is empty.
type RevokeTokenReply struct{}

// Kind implements Message.
func (*RevokeTokenReply) Kind() Kind { return KindRevokeToken }

// Encode implements Message.
func (*RevokeTokenReply) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*RevokeTokenReply) Decode(b []byte) error {
	r := newFieldReader(b, "revoke-token reply")
	return r.finish()
}
