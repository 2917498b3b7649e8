package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultHTTPListen is the default address of the operations listener:
// loopback only, since /api/status and /metrics name topics and consumers.
const DefaultHTTPListen = "127.0.0.1:7421"

// statusSampleInterval is how often the HTTP server samples the
// partitions' counters, so that throughput is known whenever asked.
const statusSampleInterval = 2 * time.Second

// HTTPConfig configures the operations listener. The zero value of a
// field picks the documented default.
type HTTPConfig struct {
	// Listen is the TCP address. Default DefaultHTTPListen; port 0 picks a
	// free port (see HTTPServer.Addr).
	Listen string
	// Metrics is the registry /metrics serves. Default NewPromMetrics.
	Metrics *PromMetrics
	// Logger receives the listener's events. Default: discard.
	Logger *slog.Logger
	// Version is the node's version, shown on the status page.
	Version string
	// Now is the clock of the status page (uptime, throughput). Default
	// time.Now.
	Now func() time.Time
	// Pprof also serves Go's profiler under /debug/pprof/. Off by
	// default: profiles show the node's internals.
	Pprof bool
}

func (c HTTPConfig) withDefaults() HTTPConfig {
	if c.Listen == "" {
		c.Listen = DefaultHTTPListen
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.Metrics == nil {
		c.Metrics = NewPromMetrics(c.Version)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// HTTPServer serves the operations endpoints of a node:
//
//	/metrics      Prometheus metrics
//	/healthz      200 while the process runs
//	/readyz       200 once storage is recovered and the QUIC listener is
//	              up, and while no partition has failed; 503 with the
//	              reason otherwise
//	/             the status page (one self-contained HTML page)
//	/api/status   the status page's data as JSON (Status)
//
// It starts before the node opens, so that /healthz answers and /readyz
// says "recovery pending" while a large data directory is recovered;
// Attach hands it the node once open.
type HTTPServer struct {
	cfg      HTTPConfig
	m        *PromMetrics
	started  time.Time
	rates    *rates
	stopping atomic.Bool

	mu   sync.Mutex
	ln   net.Listener
	srv  *http.Server
	stop chan struct{}
	done sync.WaitGroup
}

// NewHTTPServer returns a server that is not listening yet: Handler
// serves its endpoints (tests use it with net/http/httptest), Start
// listens.
func NewHTTPServer(cfg HTTPConfig) *HTTPServer {
	cfg = cfg.withDefaults()
	s := &HTTPServer{cfg: cfg, m: cfg.Metrics, started: cfg.Now(), rates: newRates(), stop: make(chan struct{})}
	s.m.setReadiness(func() (bool, string) {
		h := s.health()
		return h.Ready, h.Reason
	})
	return s
}

// StartHTTP listens on cfg.Listen and serves the operations endpoints.
func StartHTTP(cfg HTTPConfig) (*HTTPServer, error) {
	s := NewHTTPServer(cfg)
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Start listens on the configured address and serves in the background.
func (s *HTTPServer) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("node: HTTP listener on %s: %w", s.cfg.Listen, err)
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
	}
	s.mu.Lock()
	s.ln, s.srv = ln, srv
	s.mu.Unlock()
	s.done.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.cfg.Logger.Error("HTTP listener stopped", "err", err)
		}
	})
	s.done.Go(s.sampleLoop)
	s.cfg.Logger.Info("HTTP listening", "addr", ln.Addr().String(), "status_page", "http://"+ln.Addr().String()+"/")
	return nil
}

// Addr returns the address the server listens on ("" before Start).
func (s *HTTPServer) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Metrics returns the registry: give it to node.Config.Metrics, and its
// WrapFS to node.Config.FS, when opening the node.
func (s *HTTPServer) Metrics() *PromMetrics { return s.m }

// Attach hands the server the open node (a *node.Node): from now on the
// status page and the metrics read it, and readiness depends on it.
func (s *HTTPServer) Attach(n Source) { s.m.Attach(n) }

// Stopping says the node is shutting down: /readyz answers 503 from now
// on, and once the status reads in progress are done nothing reads the
// node any more. Call it before node.Node.Close.
func (s *HTTPServer) Stopping() {
	s.stopping.Store(true)
	s.m.Detach()
}

// Close stops the listener, waiting for requests in progress until ctx
// ends.
func (s *HTTPServer) Close(ctx context.Context) error {
	s.mu.Lock()
	srv := s.srv
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.mu.Unlock()
	var err error
	if srv != nil {
		err = srv.Shutdown(ctx)
	}
	s.done.Wait()
	return err
}

// sampleLoop samples the partitions' counters until Close.
func (s *HTTPServer) sampleLoop() {
	t := time.NewTicker(statusSampleInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.status(OffsetsOnly)
		}
	}
}

// health evaluates readiness.
func (s *HTTPServer) health() Health {
	h := Health{Live: true}
	if s.stopping.Load() {
		h.Checks = []Check{{Name: "shutdown", OK: false, Detail: "the node is shutting down"}}
	} else if !s.m.ref.with(func(n Source) {
		h.Checks = append([]Check{{Name: "storage", OK: true, Detail: "recovered"}}, n.ReadinessChecks()...)
	}) {
		h.Checks = []Check{{Name: "storage", OK: false, Detail: "recovery pending: the node is opening its data directory"}}
	}
	h.Ready = true
	var reasons []string
	for _, c := range h.Checks {
		if !c.OK {
			h.Ready = false
			reasons = append(reasons, c.Detail)
		}
	}
	h.Reason = strings.Join(reasons, "; ")
	return h
}
