package kafka

import (
	"container/list"
	"context"
	"errors"
	"net"
	"sync"
)

// Admission decides which connections the listener takes and keeps. A
// node hands its listener the QUIC listener's admission, so that the
// connections of both together stay under one cap of unauthenticated
// connections and one of authenticated ones; without one, the listener
// keeps its own (MaxUnauthenticated, MaxConns).
type Admission interface {
	// Admit takes an unauthenticated place for a connection from
	// remote, or says why not with one of the errors below. It may evict
	// the oldest unauthenticated connection, of this listener or of
	// another sharing the admission.
	Admit(remote net.Addr) (Place, error)
}

// Place is one connection's place in an Admission.
type Place interface {
	// Authenticated moves the place among the authenticated
	// connections, under the token's id. On an error the place holds
	// nothing and the connection is closed.
	Authenticated(tokenID string) error
	// OnEvicted calls f if the place is evicted before it
	// authenticated; stop cancels that.
	OnEvicted(f func()) (stop func() bool)
	// Release gives the place back; it may be called more than once.
	Release()
}

// Errors of an Admission, by bound; each is a reason of the connection
// metrics.
var (
	ErrConnLimit  = errors.New("kafka: connection limit reached")
	ErrTokenLimit = errors.New("kafka: connection limit of the token reached")
	ErrEvicted    = errors.New("kafka: evicted: too many connections waiting to authenticate")
	ErrShutdown   = errors.New("kafka: the node is shutting down")
)

// admissionReason is the metrics' reason for an Admission's error.
func admissionReason(err error) string {
	switch {
	case errors.Is(err, ErrConnLimit):
		return reasonConnLimit
	case errors.Is(err, ErrTokenLimit):
		return reasonTokenLimit
	case errors.Is(err, ErrEvicted):
		return reasonEvicted
	}
	return reasonShutdown
}

// TokenIdentified is what a Session may implement to have its
// connections count against its token's bound of an Admission.
type TokenIdentified interface {
	TokenID() string
}

// localAdmission is a listener's own admission: at most maxUnauth
// unauthenticated connections (one more evicts the oldest) and maxConns
// authenticated ones.
type localAdmission struct {
	maxConns, maxUnauth int

	mu      sync.Mutex
	pending list.List // of *localPlace, oldest first
	authed  int
}

type localPlace struct {
	a       *localAdmission
	elem    *list.Element // among pending, while unauthenticated
	authed  bool
	done    bool
	evicted context.Context
	evict   context.CancelCauseFunc
}

func (a *localAdmission) Admit(net.Addr) (Place, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.authed >= a.maxConns {
		return nil, ErrConnLimit
	}
	if a.pending.Len() >= a.maxUnauth {
		oldest := a.pending.Remove(a.pending.Front()).(*localPlace)
		oldest.elem = nil
		oldest.evict(ErrEvicted)
	}
	p := &localPlace{a: a}
	p.evicted, p.evict = context.WithCancelCause(context.Background())
	p.elem = a.pending.PushBack(p)
	return p, nil
}

func (p *localPlace) Authenticated(string) error {
	a := p.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if p.elem == nil {
		return ErrEvicted
	}
	a.pending.Remove(p.elem)
	p.elem = nil
	p.evict(nil)
	if a.authed >= a.maxConns {
		return ErrConnLimit
	}
	a.authed++
	p.authed = true
	return nil
}

func (p *localPlace) OnEvicted(f func()) func() bool {
	return context.AfterFunc(p.evicted, func() {
		if context.Cause(p.evicted) == ErrEvicted {
			f()
		}
	})
}

func (p *localPlace) Release() {
	a := p.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	if p.elem != nil {
		a.pending.Remove(p.elem)
		p.elem = nil
		p.evict(nil)
	}
	if p.authed {
		a.authed--
	}
}
