package kafka

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// recordedMetrics keeps what the listener reported.
type recordedMetrics struct {
	mu   sync.Mutex
	done []string // "API ERROR", ERROR empty for none
	// refused and closed are the reasons connections were refused and
	// closed for.
	refused, closed []string
}

func (m *recordedMetrics) ConnectionRefused(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refused = append(m.refused, reason)
}

func (m *recordedMetrics) ConnectionClosed(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = append(m.closed, reason)
}

// closedFor returns the reasons connections were closed for, so far.
func (m *recordedMetrics) closedFor() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.closed...)
}

func (m *recordedMetrics) RequestDone(api, code int16, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := ""
	if code != 0 {
		e = errorName(code)
	}
	m.done = append(m.done, kmsg.NameForKey(api)+" "+e)
}

func (m *recordedMetrics) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.done...)
}

// TestMetricsCountEveryAnsweredRequest: each request answered is
// reported once by its API, with the error its response carries; a
// client that read its response finds it counted.
func TestMetricsCountEveryAnsweredRequest(t *testing.T) {
	m := &recordedMetrics{}
	rc := dialServer(t, listen(t, Config{Metrics: m}))
	if code := rc.authenticate("good"); code != 0 {
		t.Fatalf("authentication refused: %v", kerr.ErrorForCode(code))
	}
	if err := rc.send(kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse()); err != nil {
		t.Fatal(err)
	}
	old := kmsg.NewPtrFetchRequest()
	old.Version = 0 // below what the listener speaks
	if err := rc.send(old, kmsg.NewPtrFetchResponse()); err != nil {
		t.Fatal(err)
	}
	want := []string{"SASLHandshake ", "SASLAuthenticate ", "ApiVersions ", "Fetch UNSUPPORTED_VERSION"}
	if got := m.requests(); !equal(got, want) {
		t.Fatalf("reported %q, want %q", got, want)
	}

	refused := dialServer(t, listen(t, Config{Metrics: m}))
	refused.authenticate("wrong")
	if got := m.requests(); got[len(got)-1] != "SASLAuthenticate SASL_AUTHENTICATION_FAILED" {
		t.Fatalf("a refused authentication reported as %q", got[len(got)-1])
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPromMetricsSeries: the Prometheus series are per API and error,
// and a second registration on the same registry continues them.
func TestPromMetricsSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := RegisterMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.RequestDone(kmsg.Produce.Int16(), 0, time.Millisecond)
	again, err := RegisterMetrics(reg)
	if err != nil {
		t.Fatalf("registering again: %v", err)
	}
	again.RequestDone(kmsg.Produce.Int16(), kerr.InvalidProducerEpoch.Code, time.Millisecond)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			v := s.GetCounter().GetValue()
			if h := s.GetHistogram(); h != nil {
				v = float64(h.GetSampleCount())
			}
			line := f.GetName()
			for _, l := range s.GetLabel() {
				line += " " + l.GetName() + "=" + l.GetValue()
			}
			got = append(got, fmt.Sprintf("%s %g", line, v))
		}
	}
	want := []string{
		"ledge_kafka_request_duration_seconds api=Produce 2",
		"ledge_kafka_request_errors_total api=Produce error=INVALID_PRODUCER_EPOCH 1",
		"ledge_kafka_requests_total api=Produce 2",
	}
	if !equal(got, want) {
		t.Fatalf("series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCloseSessions: the connections whose session matches are closed,
// and only those that authenticated.
func TestCloseSessions(t *testing.T) {
	s := listen(t, Config{})
	authed := dialServer(t, s)
	if code := authed.authenticate("good"); code != 0 {
		t.Fatalf("authentication refused: %v", kerr.ErrorForCode(code))
	}
	anonymous := dialServer(t, s)
	if err := anonymous.send(kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse()); err != nil {
		t.Fatal(err)
	}
	if n := s.CloseSessions(func(Session) bool { return true }); n != 1 {
		t.Fatalf("closed %d connections, want 1", n)
	}
	if err := authed.send(kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse()); !closedByNode(err) {
		t.Fatalf("the closed session's connection answered: %v", err)
	}
	if err := anonymous.send(kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse()); err != nil {
		t.Fatalf("a connection without a session was closed: %v", err)
	}
}
