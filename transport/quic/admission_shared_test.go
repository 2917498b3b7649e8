package quic

import (
	"errors"
	"fmt"
	"net"
	"testing"
)

func tcpFrom(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 9092} }

// TestSharedAdmissionOneCap: the places another listener takes through
// Admission count against the same caps as QUIC connections. Unauthenticated
// connections of the other listener filling MaxUnauthenticated are evicted
// by QUIC ones, oldest first, and the other way round; while MaxConns are
// authenticated on one side, the other is refused. The listener's own
// counters count its own connections only.
func TestSharedAdmissionOneCap(t *testing.T) {
	a, _ := testAdmission(admissionLimits{maxAuthenticated: 2, maxUnauthenticated: 2})
	shared := &Admission{a: a}

	evictedShared := make(chan int, 2)
	var places []*Place
	for i := range 2 {
		p, err := shared.Admit(tcpFrom(fmt.Sprintf("10.0.0.%d", i)))
		if err != nil {
			t.Fatalf("shared admit %d: %v", i, err)
		}
		p.OnEvicted(func() { evictedShared <- i })
		places = append(places, p)
	}
	quicTicket := mustAdmit(t, a, "10.0.1.1") // evicts the oldest shared place
	if err := places[0].Authenticated("alice"); !errors.Is(err, ErrEvicted) {
		t.Fatalf("an evicted shared place authenticated: %v", err)
	}
	p, err := shared.Admit(tcpFrom("10.0.0.9")) // evicts places[1]
	if err != nil {
		t.Fatal(err)
	}
	if err := places[1].Authenticated("alice"); !errors.Is(err, ErrEvicted) {
		t.Fatalf("the second shared place outlived two newer connections: %v", err)
	}
	if evicted(quicTicket) {
		t.Fatal("the QUIC connection was evicted before older shared ones")
	}
	if s := a.snapshot(); s.evicted != 0 || s.unauthenticated != 1 {
		t.Fatalf("the QUIC counters count the other listener's connections: %+v", s)
	}

	// One authenticated on each side fill MaxConns = 2: both refuse.
	if err := a.authenticated(quicTicket, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := p.Authenticated("bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := shared.Admit(tcpFrom("10.0.0.10")); !errors.Is(err, ErrConnLimit) {
		t.Fatalf("a shared admit past MaxConns: %v, want ErrConnLimit", err)
	}
	if _, err := a.admit(from("10.0.1.2")); !errors.Is(err, errConnLimit) {
		t.Fatalf("a QUIC admit past MaxConns: %v, want errConnLimit", err)
	}
	if s := a.snapshot(); s.refusedLimit != 1 || s.authenticated != 1 {
		t.Fatalf("QUIC counters %+v, want one refusal and one authenticated connection, its own", s)
	}
	p.Release()
	p.Release()
	if _, err := a.admit(from("10.0.1.3")); err != nil {
		t.Fatalf("a released shared place was not given back: %v", err)
	}
	// OnEvicted runs in a goroutine of its own: each eviction arrives.
	if got := []int{<-evictedShared, <-evictedShared}; got[0]+got[1] != 1 {
		t.Fatalf("OnEvicted reported places %v, want 0 and 1", got)
	}
}

// TestSharedAdmissionLeavesSourceBuckets: another listener's connections
// take no handshake of their address's bucket (TCP proved the address),
// so a flood of them from one address neither is refused by it nor
// drains it for a QUIC client from the same address.
func TestSharedAdmissionLeavesSourceBuckets(t *testing.T) {
	a, _ := testAdmission(admissionLimits{maxAuthenticated: 100, maxUnauthenticated: 100, sourceRate: 1, sourceBurst: 1})
	shared := &Admission{a: a}
	for i := range 10 {
		if _, err := shared.Admit(tcpFrom("10.0.0.1")); err != nil {
			t.Fatalf("shared connection %d from one address: %v", i, err)
		}
	}
	mustAdmit(t, a, "10.0.0.1")
	if _, err := a.admit(from("10.0.0.1")); !errors.Is(err, errSourceRate) {
		t.Fatalf("a second QUIC handshake past a burst of 1: %v, want errSourceRate", err)
	}
}
