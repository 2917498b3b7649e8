package quic

import (
	"context"
	"net"
)

// A node's other listener (its Kafka one) takes its connections' places
// from the QUIC listener's admission, so that both listeners' connections
// together stay under one MaxUnauthenticated and one MaxConns (and
// MaxConnsPerToken; the source buckets are QUIC's own): a flood of
// unauthenticated connections on one listener evicts the oldest
// unauthenticated connections of either, as it would on one listener.
// The listener's Stats count its own connections only; the other listener
// counts what it is refused and why.

// Errors of Admission.Admit and Place.Authenticated, by bound.
var (
	// ErrConnLimit: MaxConns connections are authenticated.
	ErrConnLimit = errConnLimit
	// ErrTokenLimit: the token has MaxConnsPerToken connections.
	ErrTokenLimit = errTokenLimit
	// ErrEvicted: the place was taken by a newer unauthenticated
	// connection before this one authenticated.
	ErrEvicted = errEvicted
)

// Admission is a listener's admission, shared with another listener.
type Admission struct{ a *admission }

// Admission returns the listener's admission, for another listener of the
// same node to take its connections' places from.
func (l *Listener) Admission() *Admission { return &Admission{a: l.adm} }

// Admit takes an unauthenticated place for a connection from addr, or
// says why not (ErrConnLimit, or ErrServerClosed once the
// listener shuts down). It may evict the oldest unauthenticated
// connection, of either listener. The place must be released.
func (s *Admission) Admit(addr net.Addr) (*Place, error) {
	t, err := s.a.admitAs(addr, true)
	if err != nil {
		return nil, err
	}
	return &Place{a: s.a, t: t}, nil
}

// Place is a connection's place in an Admission.
type Place struct {
	a *admission
	t *ticket
}

// Authenticated moves the place among the authenticated connections,
// under tokenID ("" counts against no token's bound). It fails with
// ErrEvicted, ErrConnLimit or ErrTokenLimit; the place then holds no
// room, and the connection should be closed.
func (p *Place) Authenticated(tokenID string) error { return p.a.authenticated(p.t, tokenID) }

// OnEvicted calls f, in its own goroutine, if the place is evicted before
// it authenticated. stop cancels that, as context.AfterFunc's does.
func (p *Place) OnEvicted(f func()) (stop func() bool) {
	return context.AfterFunc(p.t.evicted, func() {
		if context.Cause(p.t.evicted) == errEvicted {
			f()
		}
	})
}

// Release gives the place back once the connection is gone. It may be
// called more than once.
func (p *Place) Release() { p.a.release(p.t) }
