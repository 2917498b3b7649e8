package owner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
)

// BenchmarkKeyCommand is a command to one device of a partition on which
// every device parks a key poll: the append, the wake-up of the device's
// poll, its read and its reply, and the poll parking again. Its cost
// should not grow with the devices parked beside it.
//
//	go test ./node/owner -run X -bench KeyCommand
func BenchmarkKeyCommand(b *testing.B) {
	for _, devices := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("parked=%d", devices), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			m := ownertest.NewMeta()
			o := ownertest.NewOwner(b, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
			keys := make([]string, devices)
			got := make([]chan struct{}, devices)
			for d := range devices {
				keys[d] = fmt.Sprintf("device-%05d", d)
				got[d] = make(chan struct{}, 1)
				go func() {
					req := owner.PollRequest{From: owner.FromEnd, MaxWait: time.Hour, Key: owner.KeyMatch{Key: []byte(keys[d])}}
					for ctx.Err() == nil {
						res, err := o.Poll(ctx, req)
						if err != nil {
							return
						}
						req.From, req.Offset = owner.FromOffset, res.Next
						if len(res.Batches) > 0 {
							got[d] <- struct{}{}
						}
					}
				}()
			}
			for o.KeyPolls().Parked < devices {
				time.Sleep(time.Millisecond)
			}
			batches := make([][]byte, devices)
			for d := range devices {
				batches[d] = ownertest.KeyedBatch(b, keys[d], "reboot")
			}
			woken := o.KeyPolls().Woken
			b.ResetTimer()
			for i := range b.N {
				d := i * 7919 % devices
				if _, err := o.Produce(ctx, append([]byte(nil), batches[d]...)); err != nil {
					b.Fatal(err)
				}
				<-got[d]
			}
			b.StopTimer()
			b.ReportMetric(float64(o.KeyPolls().Woken-woken)/float64(b.N), "wakeups/command")
		})
	}
}
