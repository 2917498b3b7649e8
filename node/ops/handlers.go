package ops

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/ledgemq/ledge/node/statuspage"
)

// Handler serves the operations endpoints (see HTTPServer).
func (s *HTTPServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.m.Handler())
	mux.HandleFunc("GET /healthz", s.serveHealthz)
	mux.HandleFunc("GET /readyz", s.serveReadyz)
	mux.HandleFunc("GET /api/status", s.serveStatus)
	mux.HandleFunc("GET /{$}", s.servePage)
	if s.cfg.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return securityHeaders(mux)
}

// securityHeaders keeps the page from being framed or sniffed; the page
// needs no origin but its own.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

func (s *HTTPServer) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprintln(w, "ok")
}

// serveReadyz answers 200 "ready" or 503 "not ready: <reason>"; with
// ?verbose it lists every check.
func (s *HTTPServer) serveReadyz(w http.ResponseWriter, r *http.Request) {
	h := s.health()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !h.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	if _, verbose := r.URL.Query()["verbose"]; verbose {
		for _, c := range h.Checks {
			mark := "+"
			if !c.OK {
				mark = "-"
			}
			fmt.Fprintf(w, "[%s] %s: %s\n", mark, c.Name, c.Detail)
		}
	}
	if h.Ready {
		fmt.Fprintln(w, "ready")
		return
	}
	fmt.Fprintln(w, "not ready: "+h.Reason)
}

func (s *HTTPServer) serveStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	if _, pretty := r.URL.Query()["pretty"]; pretty {
		enc.SetIndent("", "  ")
	}
	_ = enc.Encode(s.Status())
}

func (s *HTTPServer) servePage(w http.ResponseWriter, _ *http.Request) {
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("Content-Security-Policy", strings.Join([]string{
		"default-src 'none'", "script-src 'unsafe-inline'", "style-src 'unsafe-inline'",
		"connect-src 'self'", "img-src data:", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
	}, "; "))
	_, _ = w.Write([]byte(statuspage.HTML()))
}
