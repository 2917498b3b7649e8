package quic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
)

func testAdmission(lim admissionLimits) (*admission, *fakeClock) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	if lim.maxSources == 0 {
		lim.maxSources = 16
	}
	return newAdmission(lim, clock.Now), clock
}

func from(ip string) net.Addr { return &net.UDPAddr{IP: net.ParseIP(ip), Port: 4433} }

func mustAdmit(t *testing.T, a *admission, ip string) *ticket {
	t.Helper()
	tk, err := a.admit(from(ip))
	if err != nil {
		t.Fatalf("admit from %s: %v", ip, err)
	}
	return tk
}

func evicted(tk *ticket) bool { return errors.Is(context.Cause(tk.evicted), errEvicted) }

func TestAdmissionEvictsTheOldestUnauthenticated(t *testing.T) {
	a, _ := testAdmission(admissionLimits{maxAuthenticated: 10, maxUnauthenticated: 3})
	var tickets []*ticket
	for i := range 5 {
		tickets = append(tickets, mustAdmit(t, a, fmt.Sprintf("10.0.0.%d", i)))
	}
	for i, tk := range tickets {
		if want := i < 2; evicted(tk) != want {
			t.Errorf("ticket %d evicted = %v, want %v", i, evicted(tk), want)
		}
	}
	if err := a.authenticated(tickets[0], "alice"); !errors.Is(err, errEvicted) {
		t.Errorf("an evicted connection authenticated: %v", err)
	}
	if err := a.authenticated(tickets[4], "alice"); err != nil {
		t.Fatalf("the newest connection could not authenticate: %v", err)
	}
	// An authenticated connection is never evicted.
	for i := range 10 {
		mustAdmit(t, a, fmt.Sprintf("10.0.1.%d", i))
	}
	if evicted(tickets[4]) {
		t.Error("an authenticated connection was evicted")
	}
	if s := a.snapshot(); s.evicted != 2+9 || s.unauthenticated != 3 || s.authenticated != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestAdmissionKeepsAuthenticatedPlaces(t *testing.T) {
	a, _ := testAdmission(admissionLimits{maxAuthenticated: 2, maxUnauthenticated: 2, maxPerToken: 1})
	alice := mustAdmit(t, a, "10.0.0.1")
	bob := mustAdmit(t, a, "10.0.0.2")
	alice2 := mustAdmit(t, a, "10.0.0.3")
	if !evicted(alice) {
		t.Fatal("a third unauthenticated connection did not evict the first")
	}
	if err := a.authenticated(bob, "bob"); err != nil {
		t.Fatal(err)
	}
	if err := a.authenticated(alice2, "alice"); err != nil {
		t.Fatal(err)
	}
	// Both authenticated places are taken: new connections are refused
	// before their handshake.
	if _, err := a.admit(from("10.0.0.4")); !errors.Is(err, errConnLimit) {
		t.Fatalf("admit at the limit: %v, want errConnLimit", err)
	}
	a.release(bob)
	bob2 := mustAdmit(t, a, "10.0.0.2")
	// The per-token bound: alice already has her one connection.
	alice3 := mustAdmit(t, a, "10.0.0.5")
	if err := a.authenticated(alice3, "alice"); !errors.Is(err, errTokenLimit) {
		t.Fatalf("a second connection of alice: %v, want errTokenLimit", err)
	}
	a.release(alice3)
	if err := a.authenticated(bob2, "bob"); err != nil {
		t.Fatal(err)
	}
	a.release(alice2)
	a.release(alice2) // released twice (context ends after a close): counted once
	if s := a.snapshot(); s.authenticated != 1 || s.unauthenticated != 0 || s.refusedLimit != 1 || s.refusedTokenLimit != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestAdmissionLimitsHandshakesPerSource(t *testing.T) {
	a, clock := testAdmission(admissionLimits{maxAuthenticated: 100, maxUnauthenticated: 100, sourceRate: 10, sourceBurst: 4})
	var held []*ticket
	for range 4 {
		held = append(held, mustAdmit(t, a, "192.0.2.1"))
	}
	if _, err := a.admit(from("192.0.2.1")); !errors.Is(err, errSourceRate) {
		t.Fatalf("fifth handshake in a burst of 4: %v, want errSourceRate", err)
	}
	// Another address has a bucket of its own; an IPv6 host is one /64.
	mustAdmit(t, a, "192.0.2.2")
	mustAdmit(t, a, "2001:db8::1")
	mustAdmit(t, a, "2001:db8::2")
	// A handshake that authenticates gives its token back.
	if err := a.authenticated(held[0], "x"); err != nil {
		t.Fatal(err)
	}
	mustAdmit(t, a, "192.0.2.1")
	if _, err := a.admit(from("192.0.2.1")); !errors.Is(err, errSourceRate) {
		t.Fatalf("empty bucket: %v, want errSourceRate", err)
	}
	// One token every 100 ms.
	clock.Advance(100 * time.Millisecond)
	mustAdmit(t, a, "192.0.2.1")
	if _, err := a.admit(from("192.0.2.1")); !errors.Is(err, errSourceRate) {
		t.Fatalf("empty bucket: %v, want errSourceRate", err)
	}
	if s := a.snapshot(); s.refusedSourceRate != 3 || s.sources != 3 {
		t.Errorf("stats %+v", s)
	}
}

func TestAdmissionSourceTableIsBounded(t *testing.T) {
	a, _ := testAdmission(admissionLimits{maxAuthenticated: 100, maxUnauthenticated: 100, sourceRate: 1, sourceBurst: 1, maxSources: 4})
	for i := range 10 {
		mustAdmit(t, a, fmt.Sprintf("198.51.100.%d", i))
	}
	if n := a.snapshot().sources; n != 4 {
		t.Errorf("%d sources kept, want 4", n)
	}
	// The oldest was forgotten: it starts again with a full bucket.
	mustAdmit(t, a, "198.51.100.0")
	if _, err := a.admit(from("198.51.100.9")); !errors.Is(err, errSourceRate) {
		t.Errorf("a remembered source: %v, want errSourceRate", err)
	}
}

func TestAdmissionDemandsRetryUnderLoad(t *testing.T) {
	a, _ := testAdmission(admissionLimits{maxAuthenticated: 100, maxUnauthenticated: 8, sourceRate: 1, sourceBurst: 4})
	if a.demandRetry(from("192.0.2.1")) {
		t.Fatal("Retry demanded of the first connection")
	}
	mustAdmit(t, a, "192.0.2.1")
	mustAdmit(t, a, "192.0.2.1")
	mustAdmit(t, a, "192.0.2.1")
	// That source has used more than half its burst; others have not.
	if !a.demandRetry(from("192.0.2.1")) || a.demandRetry(from("192.0.2.2")) {
		t.Fatal("Retry is not demanded of exactly the source with a low bucket")
	}
	mustAdmit(t, a, "192.0.2.2")
	// Half of the unauthenticated places in use: everyone proves its address.
	if !a.demandRetry(from("192.0.2.3")) {
		t.Fatal("no Retry demanded under load")
	}
}

func TestAdmissionWindowGrowth(t *testing.T) {
	a, _ := testAdmission(admissionLimits{maxAuthenticated: 10, maxUnauthenticated: 10, windowBudget: 100})
	tk := mustAdmit(t, a, "192.0.2.1")
	if a.growWindow(tk, 10) {
		t.Fatal("an unauthenticated connection's window grew")
	}
	if err := a.authenticated(tk, ""); err != nil {
		t.Fatal(err)
	}
	other := mustAdmit(t, a, "192.0.2.2")
	if err := a.authenticated(other, ""); err != nil {
		t.Fatal(err)
	}
	if !a.growWindow(tk, 60) || a.growWindow(other, 60) || !a.growWindow(other, 40) {
		t.Fatal("growth not bounded by the budget")
	}
	a.release(tk)
	if s := a.snapshot(); s.windowGrown != 40 || s.windowDenials != 2 {
		t.Errorf("after a release: %+v", s)
	}
}
