package node

import (
	"bytes"
	"context"
	"github.com/ledgemq/ledge/node/ops"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/ledgemq/ledge/internal/testtool"
	"github.com/ledgemq/ledge/node/uplink"
	"github.com/ledgemq/ledge/transport/wire"
)

// browser returns the path of a Chromium binary; without one it skips t
// (or fails it under CI).
func browser(t *testing.T) string {
	return testtool.Need(t, "Debian: apt-get install -y chromium (the status page in a browser)",
		"chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
}

// TestStatusPageInABrowser loads the status page of a node in headless
// Chromium, lets its script fetch /api/status and render, and checks the
// rendered page shows the topic, its offsets and the consumer's lag.
func TestStatusPageInABrowser(t *testing.T) {
	bin := browser(t)
	ops, err := ops.StartHTTP(ops.HTTPConfig{Listen: "127.0.0.1:0", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ops.Close(context.Background()) })
	tn := startNode(t, nil, nil)
	ops.Attach(tn.Node)
	ops.AttachGroups(tn.Node.Groups())

	// orders/0: offsets 0..6; "billing" committed 4, so its lag is 3.
	c := tn.mustDial(t, tn.admin)
	c.createTopic("orders", wire.TopicConfig{})
	if _, err := c.produce(c.main, "orders", 0, batch(t, 0, 0, 0, "a", "b", "c", "d", "e", "f", "g")); err != nil {
		t.Fatal(err)
	}
	var att wire.AttachConsumerReply
	c.mustCall(&wire.AttachConsumerRequest{Name: "billing"}, &att)
	me := named("billing", att.Session)
	got := c.pollOne(c.main, me, "orders", wire.Position{Mode: wire.PositionNext, Reset: wire.PositionFirst}, 0)
	var commit wire.CommitReply
	c.mustCall(&wire.CommitRequest{Consumer: me, Offsets: []wire.CommitOffset{{Topic: "orders", Offset: 4, Token: got.Token}}}, &commit)
	if commit.Partitions[0].Status != wire.StatusOK {
		t.Fatalf("commit: %+v", commit.Partitions[0])
	}

	// A group member that joined as sensor-7 (from this machine).
	var join wire.JoinGroupReply
	c.mustCall(&wire.JoinGroupRequest{Group: "shipping", Topics: []string{"orders"}, ClientID: "sensor-7",
		SessionTimeout: 5 * time.Minute}, &join)

	// An uplink to a Kafka that is not there: its 7 records stay behind.
	if err := tn.Node.uplinks.Add(context.Background(), uplink.Spec{Topic: "orders", Seeds: []string{"127.0.0.1:1"}, To: "central"}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--dump-dom", "http://"+ops.Addr()+"/")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var errText bytes.Buffer
	cmd.Stderr = &errText
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, errText.String())
	}
	page := string(dom)
	for what, re := range map[string]string{
		"the page rendered":            `<body[^>]*data-loaded="true"`,
		"the ready badge":              `id="health"[^>]*>ready<`,
		"the topic":                    `data-topic="orders"[^>]*>\s*<div class="topic-head"><h3>orders</h3>`,
		"the log start offset":         `data-partition="0"><td data-k="partition">0</td><td data-k="log_start">0</td>`,
		"the high watermark":           `<td data-k="high_watermark">7</td>`,
		"the history epoch":            `<td data-k="history_epoch">1</td>`,
		"the consumer":                 `<tr data-consumer="billing" data-kind="consumer" data-topic="orders">`,
		"the member's client and host": `<td data-k="members" class="l">` + join.MemberID[:8] + ` sensor-7@127\.0\.0\.1</td>`,
		"the consumer's lag":           `data-consumer="billing"[^>]*><td data-k="name">billing</td><td data-k="kind" class="l">consumer</td><td data-k="topic" class="l">orders</td><td data-k="lag"[^>]*>3</td>`,
		"the position by partition":    `0: 4 \(lag 3\)`,
		"no connection-lost banner":    `<div id="banner" role="alert"( class="")?>`,
		"the records/s chart":          `<svg class="chart" data-chart="topic:orders"[^>]*><line[^>]*></line><polyline points="[0-9.]+,[0-9.]+( [0-9.]+,[0-9.]+)+"></polyline></svg>`,
		"the consumer's lag chart":     `<svg class="chart" data-chart="lag:consumer:billing:orders"[^>]*><line[^>]*></line><polyline points="[0-9.]+,[0-9.]+( [0-9.]+,[0-9.]+)+"`,
		"the uplink's lag chart":       `<svg class="chart" data-chart="uplink:orders"[^>]*><line[^>]*></line><polyline points="[0-9.]+,[0-9.]+( [0-9.]+,[0-9.]+)+"`,
		"the lag chart's figure":       `orders → Kafka · lag</span><b>7</b></div><svg [^>]*>.*?</svg><div class="chart-foot"><span>[^<]*</span><span>max 7</span>`,
		"the uplink's lag":             `<tr data-uplink="orders" data-partition="0"><td data-k="name">orders/0</td><td data-k="to" class="l">central · block</td><td data-k="state" class="[^"]*">(connecting|backoff)</td><td data-k="position">\?</td><td data-k="high_watermark">7</td><td data-k="lag"[^>]*>7</td>`,
	} {
		if !regexp.MustCompile(re).MatchString(page) {
			t.Errorf("the rendered page does not show %s (/%s/)", what, re)
		}
	}
	if m := regexp.MustCompile(`\d\.\d{3,} [KMG]?i?B/s`).FindString(page); m != "" {
		t.Errorf("a rate shows raw digits: %q", m)
	}
	if t.Failed() {
		t.Logf("rendered DOM:\n%s", page)
	}
}
