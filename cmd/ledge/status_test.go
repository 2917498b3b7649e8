package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/internal/datadir"
	"github.com/ledgemq/ledge/node/ops"
)

func sampleStatus() ops.Status {
	return ops.Status{
		Time:      time.Unix(1_700_000_000, 0),
		Node:      ops.NodeInfo{Version: "v1.2.3", UptimeSeconds: 3725, Listen: "127.0.0.1:7420", DataDir: "/var/lib/ledge", DiskFreeBytes: 3 << 30, DiskTotalBytes: 16 << 30},
		Health:    ops.Health{Live: true, Ready: false, Reason: "orders/1 failed: fsync: input/output error"},
		Transport: ops.TransportStatus{ConnectionsOpen: 2, StreamsOpen: 5, MaxParkedPolls: 1024},
		Topics: []ops.TopicStatus{{Name: "orders", Partitions: []ops.PartitionStatus{
			{Partition: 0, LogStart: 8, HighWatermark: 1200, HistoryEpoch: 2, Records: 1192, SizeBytes: 5 << 20, RecordsPerSecond: 12.5, BytesPerSecond: 2048},
			{Partition: 1, HighWatermark: 7, HistoryEpoch: 1, Records: 7, SizeBytes: -1, Failed: "fsync: input/output error"},
		}}},
		Consumers: []ops.ConsumerStatus{
			{Name: "billing", Kind: "consumer", Topic: "orders", Lag: 200, Partitions: []ops.ConsumerPartition{{Partition: 0, Position: 1000, Lag: 200}}},
			{Name: "shipping", Kind: "group", Topic: "orders", Lag: 5, State: "stable", Epoch: 4,
				Members:    []ops.MemberStatus{{ID: "m1"}},
				Partitions: []ops.ConsumerPartition{{Partition: 0, Position: 1195, Lag: 5, Member: "m1"}}},
		},
		Plugins: []ops.PluginStatus{{Name: "greedy", Kind: "commit-policy", Calls: 9, Failures: 3, Timeouts: 2, Traps: 1, Strikes: 3, State: "quarantined"}},
	}
}

func TestPrintStatus(t *testing.T) {
	var out bytes.Buffer
	if err := printStatus(&out, sampleStatus()); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"ledge v1.2.3 · NOT READY: orders/1 failed", "up 1h2m", "QUIC 127.0.0.1:7420 · 2 connections",
		"disk free 3.0 GiB of 16.0 GiB",
		"PLUGIN", "quarantined",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	for _, row := range []string{
		`orders\s+0\s+8\s+1200\s+2\s+1192\s+5\.0 MiB\s+12\.5\s+2\.0 KiB/s\s+ok`,
		`orders\s+1\s+0\s+7\s+1\s+7\s+-\s+0\s+0\s+FAILED: fsync: input/output error`,
		`billing\s+consumer\s+orders\s+200\s+-\s+0:1000\(lag 200\)`,
		`shipping\s+group \(stable, epoch 4\)\s+orders\s+5\s+1\s+0:1195\(lag 5\)@m1`,
		`greedy\s+commit-policy\s+quarantined\s+9\s+3\s+2\s+1\s+3`,
	} {
		if !regexp.MustCompile(row).MatchString(text) {
			t.Errorf("output lacks a row /%s/:\n%s", row, text)
		}
	}
}

func TestStatusCommand(t *testing.T) {
	body, _ := json.Marshal(sampleStatus())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/status" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	run := func(args ...string) (string, error) {
		cmd := newStatusCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}
	if out, err := run("--http-addr", addr); err != nil || !strings.Contains(out, "orders") {
		t.Errorf("status: %v\n%s", err, out)
	}
	if out, err := run("--http-addr", srv.URL+"/", "--json"); err != nil || strings.TrimSpace(out) != string(body) {
		t.Errorf("status --json: %v\n%s", err, out)
	}
	// The listener a running node recorded in its data directory.
	dataDir := t.TempDir()
	if err := datadir.WriteListen(dataDir, datadir.Listen{PID: os.Getpid(), QUIC: "127.0.0.1:1", HTTP: addr}); err != nil {
		t.Fatal(err)
	}
	t.Setenv(statusAddrEnv, "")
	if out, err := run("--data-dir", dataDir); err != nil || !strings.Contains(out, "billing") {
		t.Errorf("status --data-dir: %v\n%s", err, out)
	}
	t.Setenv(envDataDir, dataDir)
	if out, err := run(); err != nil || !strings.Contains(out, "billing") {
		t.Errorf("status with %s: %v\n%s", envDataDir, err, out)
	}
	t.Setenv(envDataDir, "")
	t.Setenv(statusAddrEnv, addr)
	if out, err := run(); err != nil || !strings.Contains(out, "billing") {
		t.Errorf("status with %s: %v\n%s", statusAddrEnv, err, out)
	}
	if _, err := run("--http-addr", addr+"/nowhere"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a wrong address: %v", err)
	}
	srv.Close()
	// Nothing listens there now: one sentence saying where to look, not
	// Go's dial error.
	want := "no Ledge node's HTTP listener answered at " + addr +
		" (--http-addr): is `ledge serve` running, and is that the address of its --http-listen? " +
		"--data-dir (or LEDGE_DATA_DIR) names its data directory, --http-addr (or LEDGE_HTTP_ADDR) the address"
	if _, err := run("--http-addr", addr, "--timeout", "2s"); err == nil || explain(err) != want {
		t.Errorf("no node: %v\nwant %q", err, want)
	}
}
