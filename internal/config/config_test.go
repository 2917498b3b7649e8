package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/transport/quic"
)

// load registers the flags on a fresh flag set, parses args and loads
// with env as the environment.
func load(t *testing.T, args []string, env map[string]string) (*Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	l := Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return l.Load(func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ledge.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsAreTheNodeDefaults(t *testing.T) {
	c, err := load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	nc := c.Node()
	if nc.DataDir != "./"+node.DefaultDataDir || nc.Listen != node.DefaultListen {
		t.Errorf("data dir %q, listen %q", nc.DataDir, nc.Listen)
	}
	if nc.MaxPollWait != node.DefaultMaxPollWait ||
		nc.MaxPollBytes != node.DefaultMaxPollBytes || nc.MaxStreamRequests != node.DefaultStreamRequests ||
		nc.RetentionInterval != node.DefaultRetentionInterval {
		t.Errorf("poll and stream limits differ from the node's defaults: %+v", nc)
	}
	tr := nc.Transport
	if tr.MaxIncomingStreams != quic.DefaultMaxIncomingStreams ||
		tr.MaxFrameSize != quic.DefaultMaxRequestFrame || tr.InflightBudget != quic.DefaultInflightBudget ||
		tr.ReceiveWindowBudget != quic.DefaultReceiveWindowBudget || tr.MaxIdleTimeout != quic.DefaultMaxIdleTimeout ||
		tr.HandshakeTimeout != quic.DefaultHandshakeTimeout || tr.AuthTimeout != quic.DefaultAuthTimeout || tr.KeepAlivePeriod != 0 {
		t.Errorf("transport differs from the QUIC defaults: %+v", tr)
	}
	if !c.HTTP.Enabled || c.HTTP.Listen != ops.DefaultHTTPListen || c.Log.Format != "auto" || c.Log.Level != "info" {
		t.Errorf("http %+v, log %+v", c.HTTP, c.Log)
	}
	if c.ShutdownTimeout != 30*time.Second {
		t.Errorf("shutdown timeout %v", c.ShutdownTimeout)
	}
	for _, want := range []string{"localhost", "127.0.0.1", "::1"} {
		if !slices.Contains(nc.CertNames, want) {
			t.Errorf("cert names %v lack %s", nc.CertNames, want)
		}
	}
	for _, k := range Keys() {
		if c.Source(k.Name) != SourceDefault {
			t.Errorf("%s: source %v, want default", k.Name, c.Source(k.Name))
		}
	}
}

func TestPrecedenceFlagsOverEnvOverFileOverDefaults(t *testing.T) {
	file := writeFile(t, `
listen: 0.0.0.0:1000
http:
  listen: 127.0.0.1:2000
log:
  level: warn
polls:
  max_parked: 10
`)
	env := map[string]string{
		"LEDGE_LISTEN":           "0.0.0.0:1001",
		"LEDGE_HTTP_LISTEN":      "127.0.0.1:2001",
		"LEDGE_POLLS_MAX_PARKED": "", // empty: unset
	}
	c, err := load(t, []string{"--config", file, "--listen", "0.0.0.0:1002"}, env)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key, got, want string
		src            Source
	}{
		{"listen", c.Listen, "0.0.0.0:1002", SourceFlag},
		{"http.listen", c.HTTP.Listen, "127.0.0.1:2001", SourceEnv},
		{"log.level", c.Log.Level, "warn", SourceFile},
		{"polls.max_parked", strconv.Itoa(c.Polls.MaxParked), "10", SourceFile},
		{"log.format", c.Log.Format, "auto", SourceDefault},
	} {
		if tc.got != tc.want || c.Source(tc.key) != tc.src {
			t.Errorf("%s = %q from %v; want %q from %v", tc.key, tc.got, c.Source(tc.key), tc.want, tc.src)
		}
	}
	if c.File != file {
		t.Errorf("File = %q", c.File)
	}
}

func TestConfigFileFromEnvironment(t *testing.T) {
	file := writeFile(t, "data_dir: /var/lib/ledge\n")
	c, err := load(t, nil, map[string]string{ConfigEnv: file})
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/var/lib/ledge" || c.Source("data_dir") != SourceFile {
		t.Errorf("data_dir %q from %v", c.DataDir, c.Source("data_dir"))
	}
}

// badValue returns a value the key refuses, for every kind.
func badValue(k Key) string {
	if k.Name == "cpuprofile" { // any path will do, or none
		return "two\nlines"
	}
	switch k.Kind {
	case KindBool:
		return "maybe"
	case KindInt:
		return "many"
	case KindBytes:
		return "12 parsecs"
	case KindDuration:
		return "soon"
	case KindChoice:
		return "loud"
	case KindList:
		return "not valid!"
	case KindAddress:
		return "nowhere"
	}
	return ""
}

// TestEveryBadValueNamesItsKey feeds every key a bad value from each
// source and checks the error names the key, the source and what is
// allowed.
func TestEveryBadValueNamesItsKey(t *testing.T) {
	for _, k := range Keys() {
		bad := badValue(k)
		t.Run(k.Name, func(t *testing.T) {
			var errs []error
			if bad != "" { // an empty variable counts as unset
				_, err := load(t, nil, map[string]string{k.Env(): bad})
				errs = append(errs, err)
				_, err = load(t, []string{"--config", writeFile(t, k.Name+": "+yamlString(bad)+"\n")}, nil)
				errs = append(errs, err)
			}
			_, err := load(t, []string{"--" + k.Flag() + "=" + bad}, nil)
			errs = append(errs, err)
			for i, err := range errs {
				var ce *Error
				if !errors.As(err, &ce) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("source %d: %v; want a *config.Error", i, err)
				}
				msg := err.Error()
				if ce.Key != k.Name || !strings.Contains(msg, k.Name) || !strings.Contains(msg, "want") {
					t.Errorf("message %q does not name key %s and what it wants", msg, k.Name)
				}
				if !strings.Contains(msg, ce.Origin) {
					t.Errorf("message %q does not say where the value came from (%s)", msg, ce.Origin)
				}
			}
		})
	}
}

func TestRangesAreEnforcedAndStated(t *testing.T) {
	for _, tc := range []struct {
		args []string
		key  string
		want string // in the message
	}{
		{[]string{"--quic-max-conns=-1"}, "quic.max_conns", "from 0 to 65536"},
		{[]string{"--quic-max-conns=65537"}, "quic.max_conns", "from 0 to 65536"},
		{[]string{"--polls-max-bytes=1KiB"}, "polls.max_bytes", "64KiB to 32MiB"},
		{[]string{"--quic-idle-timeout=2h"}, "quic.idle_timeout", "1s to 1h"},
		{[]string{"--shutdown-timeout=0"}, "shutdown_timeout", "100ms to 1h"},
		{[]string{"--retention-interval=10ms"}, "retention_interval", "0 (off) or 1s to 24h"},
		{[]string{"--log-format=xml"}, "log.format", "auto, text, json"},
		{[]string{"--log-level=verbose"}, "log.level", "debug, info, warn, error"},
		{[]string{"--cert-addrs=10.0.0.1,ledge.local"}, "cert.addrs", `"ledge.local" is not one`},
		{[]string{"--cert-names=10.0.0.1"}, "cert.names", "addresses go to cert.addrs"},
		{[]string{"--listen=127.0.0.1:70000"}, "listen", "port from 0 to 65535"},
		{[]string{"--data-dir="}, "data_dir", "non-empty path"},
		{[]string{"--quic-inflight-budget=1MiB", "--quic-max-frame-size=8MiB"}, "quic.inflight_budget", "at least quic.max_frame_size (8MiB)"},
	} {
		_, err := load(t, tc.args, nil)
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error on %s saying %q", tc.args, err, tc.key, tc.want)
		}
	}
}

func TestEdgesAndUnits(t *testing.T) {
	c, err := load(t, []string{
		"--retention-interval=0", "--quic-keep-alive=0", "--polls-max-bytes=64KiB", "--quic-max-frame-size=1048576",
		"--quic-max-conns=65536", "--http-enabled=false", "--log-level=DEBUG", "--cert-addrs=10.0.0.1", "--cert-addrs=fd00::1",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.RetentionInterval != 0 || c.Node().RetentionInterval >= 0 {
		t.Errorf("retention_interval 0 must turn retention off: %v → node %v", c.RetentionInterval, c.Node().RetentionInterval)
	}
	if c.Polls.MaxBytes != 64<<10 || c.QUIC.MaxFrameSize != 1<<20 || c.QUIC.MaxConns != 65536 || c.HTTP.Enabled || c.Log.Level != "debug" {
		t.Errorf("config %+v", c)
	}
	if !slices.Equal(c.CertAddrs, []string{"10.0.0.1", "fd00::1"}) {
		t.Errorf("repeated list flag: %v", c.CertAddrs)
	}
	// A bare boolean flag means true.
	c, err = load(t, []string{"--http-enabled"}, map[string]string{"LEDGE_HTTP_ENABLED": "off"})
	if err != nil || !c.HTTP.Enabled {
		t.Errorf("--http-enabled: %v, %v", c, err)
	}
}

func TestAllBadValuesAreReportedAtOnce(t *testing.T) {
	_, err := load(t, []string{"--quic-max-conns=-1", "--log-level=loud"}, map[string]string{"LEDGE_LISTEN": "nowhere"})
	for _, key := range []string{"quic.max_conns", "log.level", "listen"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("error %v does not name %s", err, key)
		}
	}
}

func TestFileErrors(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"quic:\n  max_con: 5\n", "quic.max_con (from "},
		{"quic:\n  max_con: 5\n", "did you mean quic.max_conns?"},
		{"nonsense_entirely_unrelated: 1\n", "unknown key"},
		{"listen: [1, 2]\n", `listen = "1,2"`},
		{"cert:\n  addrs: [10.0.0.1, {a: b}]\n", "want a list of plain values"},
		{"- a\n- b\n", "want a mapping of keys"},
		{"listen: :\n  bad", "ledge.yaml"},
		{"listen: a:1\nlisten: b:2\n", "listen is set twice"},
		{"http:\n  listen: a:1\nhttp.listen: b:2\n", "http.listen is set twice"},
	} {
		_, err := load(t, []string{"--config", writeFile(t, tc.body)}, nil)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("file %q: %v; want an ErrInvalid mentioning %q", tc.body, err, tc.want)
		}
	}
	if _, err := load(t, []string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}, nil); err == nil {
		t.Error("a missing file named by --config must fail")
	}
	c, err := load(t, []string{"--config", writeFile(t, "# nothing set\n")}, nil)
	if err != nil || c.Listen != node.DefaultListen {
		t.Errorf("an empty file: %v", err)
	}
}

// TestPrintReadsBack prints a configuration with values from every source
// and loads the printed text as a file: every value survives.
func TestPrintReadsBack(t *testing.T) {
	file := writeFile(t, "polls:\n  max_wait: 90s\n")
	c, err := load(t, []string{"--config", file, "--listen", "[::]:7420", "--cert-names", "a.example,b.example",
		"--quic-inflight-budget", "96MiB"}, map[string]string{"LEDGE_LOG_FORMAT": "json"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := c.Print(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"# flag --listen", "# LEDGE_LOG_FORMAT", "# " + file, "# default", "max_wait: 1m30s", "inflight_budget: 96MiB"} {
		if !strings.Contains(text, want) {
			t.Errorf("printed config lacks %q:\n%s", want, text)
		}
	}
	again, err := load(t, []string{"--config", writeFile(t, text)}, nil)
	if err != nil {
		t.Fatalf("printed config does not load: %v\n%s", err, text)
	}
	for _, k := range Keys() {
		if a, b := k.get(c), k.get(again); a != b {
			t.Errorf("%s: %q printed, %q read back", k.Name, a, b)
		}
	}
}

func TestNamesOfAKey(t *testing.T) {
	k, ok := KeyByName("quic.max_requests_per_stream")
	if !ok || k.Flag() != "quic-max-requests-per-stream" || k.Env() != "LEDGE_QUIC_MAX_REQUESTS_PER_STREAM" {
		t.Errorf("%+v: flag %s, env %s", k, k.Flag(), k.Env())
	}
	seen := [3]map[string]bool{{}, {}, {}}
	for _, k := range Keys() {
		for i, n := range []string{k.Name, k.Flag(), k.Env()} {
			if seen[i][n] {
				t.Errorf("%s is used twice", n)
			}
			seen[i][n] = true
		}
		if k.Help == "" || k.Allowed == "" {
			t.Errorf("%s lacks help or allowed values", k.Name)
		}
	}
}

func TestBytesAndDurations(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1024": 1024, "64KiB": 64 << 10, "8 MiB": 8 << 20, "1gib": 1 << 30, "2MB": 2e6, "10B": 10} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"-1", "1.5MiB", "MiB", "9999999TiB"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) succeeded", in)
		}
	}
	for d, want := range map[time.Duration]string{5 * time.Minute: "5m", time.Hour: "1h", 90 * time.Second: "1m30s", 100 * time.Millisecond: "100ms", 0: "0s"} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q; want %q", d, got, want)
		}
	}
}

// plugins.call_timeout is the plugin host's call deadline: by default the
// host's own, and whatever a flag, the environment or the file says is
// what the node hands its plugin host, and what --print-config prints.
func TestPluginCallTimeoutReachesTheHost(t *testing.T) {
	c, err := load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Node().Plugins.CallTimeout; got != plugins.DefaultCallTimeout {
		t.Errorf("default plugin call timeout %v, want the host's %v", got, plugins.DefaultCallTimeout)
	}
	for _, src := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"flag", []string{"--plugins-call-timeout", "2s"}, nil},
		{"environment", nil, map[string]string{"LEDGE_PLUGINS_CALL_TIMEOUT": "2s"}},
		{"file", []string{"--config", writeFile(t, "plugins:\n  call_timeout: 2s\n")}, nil},
	} {
		c, err := load(t, src.args, src.env)
		if err != nil {
			t.Fatalf("%s: %v", src.name, err)
		}
		if got := c.Node().Plugins.CallTimeout; got != 2*time.Second {
			t.Errorf("%s: the node's plugin host gets a call timeout of %v, want 2s", src.name, got)
		}
		var b bytes.Buffer
		if err := c.Print(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "  call_timeout: 2s  # ") {
			t.Errorf("%s: --print-config does not show the setting:\n%s", src.name, b.String())
		}
	}
	if _, err := load(t, []string{"--plugins-call-timeout", "1m"}, nil); err == nil || !strings.Contains(err.Error(), "plugins.call_timeout") {
		t.Errorf("a call timeout past 10s: %v, want it refused, naming the key", err)
	}
}

// quic.handshake_wait_target is the listener's bound on how long new
// connections wait for their handshake to be taken up: by default the
// transport's own, a value as given, and 0 the transport's "off" (a
// negative bound), never a zero the transport would read as "default".
func TestHandshakeWaitTargetReachesTheListener(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want time.Duration
	}{
		{"default", nil, quic.DefaultHandshakeWaitTarget},
		{"given", []string{"--quic-handshake-wait-target", "2s"}, 2 * time.Second},
		{"off", []string{"--quic-handshake-wait-target", "0"}, -1},
	} {
		c, err := load(t, tc.args, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := c.Node().Transport.HandshakeWaitTarget; got != tc.want {
			t.Errorf("%s: the listener gets a handshake wait target of %v, want %v", tc.name, got, tc.want)
		}
	}
}
