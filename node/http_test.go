package node

import (
	"encoding/json"
	"errors"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/node/ops/opstest"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// opsServer is an HTTPServer behind an httptest listener.
type opsServer struct {
	*ops.HTTPServer
	url string
}

func newOpsServer(t *testing.T, cfg ops.HTTPConfig) *opsServer {
	t.Helper()
	if cfg.Version == "" {
		cfg.Version = "test"
	}
	s := ops.NewHTTPServer(cfg)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return &opsServer{HTTPServer: s, url: ts.URL}
}

// get fetches path and returns the status code and body.
func (s *opsServer) get(t testing.TB, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(s.url + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// status fetches /api/status.
func (s *opsServer) status(t testing.TB) ops.Status {
	t.Helper()
	code, body := s.get(t, "/api/status")
	if code != http.StatusOK {
		t.Fatalf("/api/status: %d %s", code, body)
	}
	var st ops.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/api/status: %v\n%s", err, body)
	}
	return st
}

// instrument points cfg's metrics hooks at m: the fsync timings, and the
// request path when the node's Config has its Metrics field. It reports
// whether the request path is instrumented.
func instrument(cfg *Config, m *ops.PromMetrics) bool {
	cfg.FS = m.WrapFS(cfg.FS, nil)
	f := reflect.ValueOf(cfg).Elem().FieldByName("Metrics")
	if !f.IsValid() || !f.CanSet() || !reflect.TypeOf(m).AssignableTo(f.Type()) {
		return false
	}
	f.Set(reflect.ValueOf(m))
	return true
}

func TestReadinessFollowsTheNodesLife(t *testing.T) {
	s := newOpsServer(t, ops.HTTPConfig{})

	// The process is live before the node is open; it is not ready.
	if code, body := s.get(t, "/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz before open: %d %q", code, body)
	}
	code, body := s.get(t, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "recovery pending") {
		t.Errorf("/readyz before open: %d %q", code, body)
	}

	store := newMemStorage()
	tn := startNode(t, store, nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("orders", wire.TopicConfig{Partitions: 2})
	s.Attach(tn.Node)
	if code, body := s.get(t, "/readyz"); code != http.StatusOK || strings.TrimSpace(body) != "ready" {
		t.Errorf("/readyz once open: %d %q", code, body)
	}
	if code, body := s.get(t, "/readyz?verbose"); code != http.StatusOK ||
		!strings.Contains(body, "[+] storage") || !strings.Contains(body, "[+] listener") || !strings.Contains(body, "2 partitions serving") {
		t.Errorf("/readyz?verbose: %d %q", code, body)
	}

	// A failed partition makes the node not ready, and says which.
	p := store.topic("orders").Partitions[1].(*memPartition)
	p.SetFailed(errors.New("fsync segment: input/output error"))
	code, body = s.get(t, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "orders/1 failed: fsync segment: input/output error") {
		t.Errorf("/readyz with a failed partition: %d %q", code, body)
	}
	st := s.status(t)
	if st.Health.Ready || st.Topics[0].Partitions[1].Failed == "" || st.Topics[0].Partitions[0].Failed != "" {
		t.Errorf("status with a failed partition: %+v", st.Health)
	}
	if v := opstest.MustMetric(t, s.Metrics().Registry(), "ledge_partition_failed", "topic", "orders", "partition", "1"); v != 1 {
		t.Errorf("ledge_partition_failed = %v", v)
	}
	if v := opstest.MustMetric(t, s.Metrics().Registry(), "ledge_ready"); v != 0 {
		t.Errorf("ledge_ready = %v", v)
	}
	p.SetFailed(nil)

	// A shutdown makes it not ready at once; the process stays live.
	s.Stopping()
	if code, body := s.get(t, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Errorf("/readyz while stopping: %d %q", code, body)
	}
	if code, _ := s.get(t, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while stopping: %d", code)
	}
	if st := s.status(t); len(st.Topics) != 0 || st.Health.Ready {
		t.Errorf("status after Stopping still reads the node: %+v", st)
	}
}

func TestEndpointsAndHeaders(t *testing.T) {
	s := newOpsServer(t, ops.HTTPConfig{})
	resp, err := http.Get(s.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("/: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("/ lacks %s", h)
		}
	}
	// The SVG namespace is a name the page's charts create elements in,
	// never a resource it loads.
	page := strings.ReplaceAll(string(body), `"http://www.w3.org/2000/svg"`, "")
	for _, banned := range []string{"http://", "https://", "<link", "src=\""} {
		if strings.Contains(page, banned) {
			t.Errorf("the status page refers to an outside resource (%q)", banned)
		}
	}
	if !strings.Contains(page, `fetch("api/status"`) {
		t.Error("the status page does not fetch api/status")
	}
	if code, body := s.get(t, "/metrics"); code != http.StatusOK || !strings.Contains(body, "ledge_build_info") {
		t.Errorf("/metrics: %d", code)
	}
	if code, _ := s.get(t, "/nope"); code != http.StatusNotFound {
		t.Errorf("/nope: %d", code)
	}
	resp, err = http.Post(s.url+"/readyz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /readyz: %d", resp.StatusCode)
	}
}

func TestStartHTTPListensAndCloses(t *testing.T) {
	s, err := ops.StartHTTP(ops.HTTPConfig{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + s.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %d", resp.StatusCode)
	}
	if err := s.Close(safetyContext(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + s.Addr() + "/healthz"); err == nil {
		t.Error("the listener still answers after Close")
	}
	if _, err := ops.StartHTTP(ops.HTTPConfig{Listen: "127.0.0.1:99999"}); err == nil || !strings.Contains(err.Error(), "127.0.0.1:99999") {
		t.Errorf("a bad address: %v", err)
	}
}

func TestStatusUptimeFollowsTheClock(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	s := newOpsServer(t, ops.HTTPConfig{Now: clock})
	now = now.Add(90 * time.Second)
	st := s.status(t)
	if st.Node.UptimeSeconds != 90 || st.Node.Version != "test" || !st.Time.Equal(now) {
		t.Errorf("node %+v at %v", st.Node, st.Time)
	}
	if st.Topics == nil || st.Consumers == nil || st.Plugins == nil {
		t.Error("empty lists must be [] in JSON, not null")
	}
}
