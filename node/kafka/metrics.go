package kafka

import (
	"errors"
	"reflect"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metrics receives one call per Kafka request the listener answered.
// Implementations must be safe for concurrent use and must not block:
// the calls are made on the connections' reply path.
type Metrics interface {
	// RequestDone reports a request of API key api, the first error code
	// its response carries (0 for none, at the top or in any topic or
	// partition), and the time from the request being read to its
	// response being ready to write (a produce's wait for durability and
	// a fetch's long poll included).
	RequestDone(api int16, errorCode int16, d time.Duration)
	// ConnectionRefused reports a connection closed as soon as it was
	// accepted, and why (conn_limit, shutdown).
	ConnectionRefused(reason string)
	// ConnectionClosed reports a connection served and closed, and why
	// (client_closed, auth_timeout, idle, evicted, too_large, ...;
	// docs/KAFKA.md lists them).
	ConnectionClosed(reason string)
}

// noMetrics counts nothing.
type noMetrics struct{}

func (noMetrics) RequestDone(int16, int16, time.Duration) {}
func (noMetrics) ConnectionRefused(string)                {}
func (noMetrics) ConnectionClosed(string)                 {}

// PromMetrics is Metrics as Prometheus series: per API, requests,
// requests whose response carries an error (by error name), and their
// latency. Series are per API and error, never per connection or client.
type PromMetrics struct {
	requests  *prometheus.CounterVec
	errors    *prometheus.CounterVec
	durations *prometheus.HistogramVec
	refused   *prometheus.CounterVec
	closed    *prometheus.CounterVec
}

// RegisterMetrics registers the listener's series with reg, or finds
// those already registered there (a node reopened on the same registry
// continues its counters).
func RegisterMetrics(reg prometheus.Registerer) (*PromMetrics, error) {
	m := &PromMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ledge_kafka_requests_total",
			Help: "Kafka requests answered by the Kafka listener, by API (Produce, Fetch, OffsetCommit, ...).",
		}, []string{"api"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ledge_kafka_request_errors_total",
			Help: "Kafka requests whose response carries an error code, by API and the first error's name (FENCED_LEADER_EPOCH, UNKNOWN_MEMBER_ID, ...).",
		}, []string{"api", "error"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ledge_kafka_request_duration_seconds",
			Help:    "Time from a Kafka request being read to its response being ready to write, by API (Produce: until durable per the topic's policy; Fetch: including the long poll).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"api"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ledge_kafka_connections_refused_total",
			Help: "Kafka connections closed as soon as they were accepted, by reason (conn_limit, shutdown).",
		}, []string{"reason"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ledge_kafka_connections_closed_total",
			Help: "Kafka connections closed after being served, by reason (client_closed, auth_timeout, auth_failed, before_auth, evicted, idle, read_timeout, too_large, malformed, unserved_api, conn_limit, token_limit, revoked, handler_failure, shutdown).",
		}, []string{"reason"}),
	}
	var err error
	if m.requests, err = register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.errors, err = register(reg, m.errors); err != nil {
		return nil, err
	}
	if m.durations, err = register(reg, m.durations); err != nil {
		return nil, err
	}
	if m.refused, err = register(reg, m.refused); err != nil {
		return nil, err
	}
	if m.closed, err = register(reg, m.closed); err != nil {
		return nil, err
	}
	return m, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if old, ok := are.ExistingCollector.(C); ok {
			return old, nil
		}
	}
	return c, err
}

// RequestDone implements Metrics.
func (m *PromMetrics) RequestDone(api, errorCode int16, d time.Duration) {
	name := kmsg.NameForKey(api)
	m.requests.WithLabelValues(name).Inc()
	m.durations.WithLabelValues(name).Observe(d.Seconds())
	if errorCode != 0 {
		m.errors.WithLabelValues(name, errorName(errorCode)).Inc()
	}
}

// ConnectionRefused implements Metrics.
func (m *PromMetrics) ConnectionRefused(reason string) { m.refused.WithLabelValues(reason).Inc() }

// ConnectionClosed implements Metrics.
func (m *PromMetrics) ConnectionClosed(reason string) { m.closed.WithLabelValues(reason).Inc() }

func errorName(code int16) string {
	var e *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &e) {
		return e.Message
	}
	return "UNKNOWN"
}

// firstErrorCode is the first non-zero error code of a response: its own,
// or one of its topics', partitions' or members'.
func firstErrorCode(r kmsg.Response) int16 {
	switch r := r.(type) {
	case *kmsg.ProduceResponse: // the hot path, without reflection
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				if c := r.Topics[i].Partitions[j].ErrorCode; c != 0 {
					return c
				}
			}
		}
		return 0
	case *kmsg.FetchResponse:
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				if c := r.Topics[i].Partitions[j].ErrorCode; c != 0 {
					return c
				}
			}
		}
		return 0
	}
	return errorCodeIn(reflect.ValueOf(r), 4)
}

// errorCodeIn looks for a non-zero ErrorCode field in v, and in the
// structs and slices of structs it holds, depth levels down.
func errorCodeIn(v reflect.Value, depth int) int16 {
	if depth == 0 {
		return 0
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return 0
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return 0
	}
	if f := v.FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 && f.Int() != 0 {
		return int16(f.Int())
	}
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			for j := range f.Len() {
				if c := errorCodeIn(f.Index(j), depth-1); c != 0 {
					return c
				}
			}
		case f.Kind() == reflect.Struct:
			if c := errorCodeIn(f, depth-1); c != 0 {
				return c
			}
		}
	}
	return 0
}
