package config

import "testing"

// Left at 0, connections and parked polls are sized from the node's
// memory: an edge gateway of 512 MiB gets fewer than a server of 16 GiB,
// within the bounds; unknown memory keeps fixed counts; a value set by
// hand is kept.
func TestLimitsSizedFromMemory(t *testing.T) {
	for _, tc := range []struct {
		name          string
		memory        int64
		conns, parked int
	}{
		{"256 MiB", 256 << 20, 512, 1024},
		{"512 MiB gateway", 512 << 20, 1024, 2048},
		{"4 GiB", 4 << 30, 8192, 16384},
		{"16 GiB", 16 << 30, 32768, 65536},
		{"64 GiB", 64 << 30, 65536, 262144},
		{"64 MiB", 64 << 20, 256, 1024},
		{"unknown", 0, fallbackConns, fallbackParked},
	} {
		c := Defaults()
		c.sizeFromMemory(tc.memory)
		if c.QUIC.MaxConns != tc.conns || c.Polls.MaxParked != tc.parked {
			t.Errorf("%s: %d connections and %d parked polls, want %d and %d", tc.name, c.QUIC.MaxConns, c.Polls.MaxParked, tc.conns, tc.parked)
		}
	}
	c, err := load(t, []string{"--quic-max-conns", "300", "--memory-limit", "1GiB"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.QUIC.MaxConns != 300 || c.Polls.MaxParked != 4096 {
		t.Errorf("with 300 connections set and a 1 GiB memory limit: %d connections, %d parked polls; want 300 and 4096", c.QUIC.MaxConns, c.Polls.MaxParked)
	}
}
