package sdk

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
)

// TestProducerResumesOnStreamEndedBetweenRequests: a node that shuts down
// answers what it read and ends the stream; a one-at-a-time producer's
// next record finds the stream ended when it sends it (no reply will ever
// come for it). The producer opens a new stream and the record is
// acknowledged at once, not after the request timeout.
func TestProducerResumesOnStreamEndedBetweenRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode()
		n.endAfterReply = true
		p := testProducer(t, n, 1)
		ctx, cancel := context.WithTimeout(context.Background(), n.timeout/10)
		defer cancel()
		var want []string
		for i := range 4 {
			v := fmt.Sprintf("v%d", i)
			if err := p.ProduceSync(ctx, &Record{Value: []byte(v)}); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			want = append(want, v)
		}
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := n.values(0); !slices.Equal(got, want) {
			t.Errorf("log %v, want %v", got, want)
		}
	})
}
