package engine

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A node killed after acknowledging records, restarted, stopped cleanly and
// restarted again serves its records: the gap that the unclean restart
// left above the log is not durable data that went missing.
func TestUncleanThenCleanRestartServes(t *testing.T) {
	for _, d := range []Durability{DurabilityAlways, DurabilityNone} {
		t.Run(d.String(), func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			clock := newFakeClock()
			e := mustOpen(t, testOptions(mem, clock))
			tp, err := e.CreateTopic("t", TopicConfig{Partitions: 1, Durability: d})
			if err != nil {
				t.Fatal(err)
			}
			p, _ := tp.Partition(0)
			appendWait(t, p, makeBatch(t, "a", 3, 1))
			if err := p.WaitDurable(t.Context(), 2); err != nil {
				t.Fatal(err)
			}
			if d == DurabilityNone {
				// make it durable so that the crash keeps it
				_ = e.Close()
				e = mustOpen(t, testOptions(mem, clock))
			}
			crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			_ = e.Close()

			e = mustOpen(t, testOptions(crashed, clock)) // unclean restart
			if err := e.Close(); err != nil {            // clean stop
				t.Fatal(err)
			}
			e = mustOpen(t, testOptions(crashed, clock))
			defer e.Close()
			tp, _ = e.Topic("t")
			p, _ = tp.Partition(0)
			st := p.State()
			if st.Failed != nil {
				t.Fatalf("partition not served after unclean then clean restart: %v", st.Failed)
			}
			plan, err := p.PlanRead(0, 1<<20)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			defer plan.Release()
			res, err := plan.Execute(t.Context())
			if err != nil || len(res.Batches) != 1 {
				t.Fatalf("read %d batches, %v", len(res.Batches), err)
			}
		})
	}
}
