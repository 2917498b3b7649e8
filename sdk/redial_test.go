package sdk

import (
	"testing"
	"time"
)

// A client the node keeps refusing waits longer each time, up to a
// bound, at a random point between half and all of each pause (so that
// a fleet refused together spreads out), and waits no more once it has
// connected. The clock and the draw are the test's.
func TestRedialPausesGrowWithJitterAndEndOnConnect(t *testing.T) {
	at := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		name string
		draw float64
		want []time.Duration
	}{
		{"longest draws", 1, []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
			1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}},
		{"shortest draws", 0, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
			800 * time.Millisecond, 1600 * time.Millisecond, 2500 * time.Millisecond, 2500 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := redial{jitter: func() float64 { return tc.draw }}
			if d := r.pause(at); d != 0 {
				t.Fatalf("a client never refused pauses %v", d)
			}
			for i, want := range tc.want {
				if d := r.refuse(at); d != want {
					t.Errorf("refusal %d: pause %v, want %v", i+1, d, want)
				}
				if d := r.pause(at.Add(want / 2)); d != want/2 {
					t.Errorf("refusal %d: halfway through, %v left, want %v", i+1, d, want/2)
				}
				if d := r.pause(at.Add(want)); d != 0 {
					t.Errorf("refusal %d: %v left once the pause is over", i+1, d)
				}
			}
			r.connected()
			if d := r.pause(at); d != 0 {
				t.Errorf("a client that connected still pauses %v", d)
			}
			if d, first := r.refuse(at), tc.want[0]; d != first {
				t.Errorf("the first refusal after a connection pauses %v, want %v again", d, first)
			}
		})
	}
}
