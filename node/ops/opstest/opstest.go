package opstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// MetricValue returns the value of the metric name whose labels include
// every pair of labels ("k", "v", ...); ok is false when there is none.
func MetricValue(t testing.TB, g prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, mt := range f.GetMetric() {
			have := map[string]string{}
			for _, lp := range mt.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			return valueOf(mt), true
		}
	}
	return 0, false
}

func valueOf(mt *dto.Metric) float64 {
	switch {
	case mt.GetCounter() != nil:
		return mt.GetCounter().GetValue()
	case mt.GetGauge() != nil:
		return mt.GetGauge().GetValue()
	case mt.GetHistogram() != nil:
		return float64(mt.GetHistogram().GetSampleCount())
	}
	return mt.GetUntyped().GetValue()
}

// MustMetric is MetricValue that fails the test when the metric is absent.
func MustMetric(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	v, ok := MetricValue(t, g, name, labels...)
	if !ok {
		t.Fatalf("no metric %s%v", name, labels)
	}
	return v
}
