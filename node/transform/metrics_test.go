package transform

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics say each partition's progress, and a registry a second
// manager registers in reports the second manager's transforms.
func TestMetricsReportEachPartition(t *testing.T) {
	w := newWorld(t)
	defer func() { w.mgr.Close() }()
	w.createTopic("in", 2)
	w.createTopic("out", 1)
	w.produce("in", 1, numbered("m", 0, 3)...)
	reg := prometheus.NewRegistry()
	if err := RegisterMetrics(reg, w.mgr); err != nil {
		t.Fatal(err)
	}
	addPass(t, w, "copy")
	w.waitFor("the transform caught up", func() bool {
		info := mustStatus(t, w, "copy")
		return len(info.Partitions) == 2 && info.Partitions[1].Committed == 3
	})
	w.restart()
	if err := RegisterMetrics(reg, w.mgr); err != nil {
		t.Fatalf("a second manager on the same registry: %v", err)
	}
	if err := w.mgr.Pause(context.Background(), "copy"); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got = append(got, fmt.Sprintf("%s{%s} %g", f.GetName(), strings.Join(labels, ","), m.GetGauge().GetValue()+m.GetCounter().GetValue()))
		}
	}
	for _, want := range []string{
		"ledge_transform_committed_offset{partition=0,transform=copy} 0",
		"ledge_transform_committed_offset{partition=1,transform=copy} 3",
		"ledge_transform_lag_records{partition=1,transform=copy} 0",
		"ledge_transform_running{transform=copy} 0",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("no %s in\n%s", want, strings.Join(got, "\n"))
		}
	}
}
