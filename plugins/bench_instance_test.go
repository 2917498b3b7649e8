package plugins

import (
	"context"
	"errors"
	"testing"
)

// BenchmarkInstanceStart starts an instance of a Go plugin (the hostile
// test module, 2.9 MB) per call: every call panics, which discards its
// instance, as every failing call does. It reports the Go heap allocated
// per call, which a node beside plugins failing in a loop has to collect.
//
//	go test ./plugins -run '^$' -bench InstanceStart -benchtime 50x
func BenchmarkInstanceStart(b *testing.B) {
	h := newTestHost(b, Config{MaxStrikes: 1 << 30})
	mustAdd(b, h, "p", KindFilter, goModule(b, hostilePkg))
	v := hostileView3(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Filter(context.Background(), "p", Params{"do": "panic"}, v); !errors.Is(err, ErrTrap) {
			b.Fatalf("a panicking call: %v", err)
		}
	}
}
