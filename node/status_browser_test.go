package node

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/internal/testtool"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/node/statuspage"
	"github.com/ledgemq/ledge/node/uplink"
	"github.com/ledgemq/ledge/transport/wire"
)

// browser returns the path of a Chromium binary; without one it skips t
// (or fails it under CI).
func browser(t *testing.T) string {
	return testtool.Need(t, "Debian: apt-get install -y chromium (the status page in a browser)",
		"chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
}

// statusPageWithData starts a node with its HTTP endpoints and gives its
// status page something to show: a topic, a consumer behind it, a group
// member and an uplink that cannot forward. It returns the page's address
// and the member's id.
func statusPageWithData(t *testing.T) (addr, member string) {
	t.Helper()
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
	return ops.Addr(), join.MemberID
}

// runBrowser runs headless Chromium on the page at addr with args added,
// and returns what it printed. The virtual time budget lets the page's
// script fetch /api/status and refresh a few times (every 2 s) before
// Chromium dumps or captures it.
func runBrowser(t *testing.T, bin, addr string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000"}, args...)
	cmd := exec.CommandContext(ctx, bin, append(args, "http://"+addr+"/")...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var errText bytes.Buffer
	cmd.Stderr = &errText
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, errText.String())
	}
	return out
}

// TestStatusPageInABrowser loads the status page of a node in headless
// Chromium, lets its script fetch /api/status and render, and checks the
// rendered page shows the topic, its offsets and the consumer's lag.
func TestStatusPageInABrowser(t *testing.T) {
	bin := browser(t)
	addr, member := statusPageWithData(t)
	dom := runBrowser(t, bin, addr, "--dump-dom")
	page := string(dom)
	for what, re := range map[string]string{
		"the page rendered":            `<body[^>]*data-loaded="true"`,
		"the ready badge":              `id="health"[^>]*>ready<`,
		"the topic":                    `data-topic="orders"[^>]*>\s*<div class="topic-head"><h3>orders</h3>`,
		"the log start offset":         `data-partition="0"><td data-k="partition">0</td><td data-k="log_start">0</td>`,
		"the high watermark":           `<td data-k="high_watermark">7</td>`,
		"the history epoch":            `<td data-k="history_epoch">1</td>`,
		"the consumer":                 `<tr data-consumer="billing" data-kind="consumer" data-topic="orders">`,
		"the member's client and host": `<td data-k="members" class="l">` + member[:8] + ` sensor-7@127\.0\.0\.1</td>`,
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

// TestStatusPageChartsDrawInAScreenshot takes a screenshot of the status
// page in headless Chromium and looks for the charts where a person would:
// in the pixels. The charts' lines are drawn in the page's accent colour
// (--accent, used by nothing else), so each chart that renders leaves a
// long run of such pixels across its card; a chart hidden by CSS, of zero
// size, or not drawn at all leaves none. The DOM test above cannot tell:
// an SVG with display:none or height 0 is still in the DOM.
func TestStatusPageChartsDrawInAScreenshot(t *testing.T) {
	bin := browser(t)
	addr, _ := statusPageWithData(t)
	shot := filepath.Join(t.TempDir(), "status.png")
	// 1280x900 CSS pixels at a device scale of 2: the 1.5 px lines cover
	// whole device pixels, so their colour is exact in their middle.
	const scale = 2
	runBrowser(t, bin, addr, "--hide-scrollbars", "--window-size=1280,900",
		fmt.Sprintf("--force-device-scale-factor=%d", scale), "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}

	// The accent colours of the light and dark schemes (index.html's
	// :root). Chromium draws the light one unless the system prefers dark.
	accents := []color.RGBA{{0x2f, 0x5f, 0xb3, 0xff}, {0x79, 0xa6, 0xf2, 0xff}}
	if page := statuspage.HTML(); !strings.Contains(page, "--accent: #2f5fb3") || !strings.Contains(page, "--accent: #79a6f2") ||
		strings.Count(page, "var(--accent)") != 1 || !strings.Contains(page, "svg.chart polyline { fill: none; stroke: var(--accent)") {
		t.Fatal("the charts' stroke colour changed, or --accent is used by more than the charts' lines: update this test's colours")
	}
	// A chart line spans its card: the page draws the minutes it has
	// seen across the whole width of the chart, some 250 CSS pixels here.
	const minWidth = 150 * scale
	var charts []pixelRegion
	for _, r := range strokeRegions(img, accents, 40) {
		if r.width() >= minWidth {
			charts = append(charts, r)
		}
	}
	// Four series: billing's lag, shipping's lag, orders' records/s and
	// the uplink's lag.
	if len(charts) != 4 {
		t.Errorf("the screenshot shows %d chart lines at least %d px wide (%v), want 4: billing's lag, shipping's lag, orders' records/s, the uplink's lag",
			len(charts), minWidth, charts)
		keep := filepath.Join(os.TempDir(), "ledge-status-screenshot.png")
		if b, err := os.ReadFile(shot); err == nil && os.WriteFile(keep, b, 0o644) == nil {
			t.Logf("the screenshot is kept in %s", keep)
		}
	}
	for _, r := range charts {
		if r.height() > 48*scale {
			t.Errorf("a chart line %v is taller than its chart (3rem)", r)
		}
	}
}

// pixelRegion is a connected set of pixels and its bounding box.
type pixelRegion struct{ minX, minY, maxX, maxY, pixels int }

func (r pixelRegion) width() int  { return r.maxX - r.minX + 1 }
func (r pixelRegion) height() int { return r.maxY - r.minY + 1 }

func (r pixelRegion) String() string {
	return fmt.Sprintf("%dx%d at (%d,%d), %d px", r.width(), r.height(), r.minX, r.minY, r.pixels)
}

// strokeRegions returns the connected regions (8 neighbours) of the
// pixels within tolerance of one of colours in every channel; the
// tolerance allows for anti-aliasing at the lines' edges.
func strokeRegions(img image.Image, colours []color.RGBA, tolerance int) []pixelRegion {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	abs := func(x int) int { return max(x, -x) }
	near := func(c color.Color) bool {
		r, g, bl, _ := c.RGBA()
		for _, want := range colours {
			if abs(int(r>>8)-int(want.R)) <= tolerance && abs(int(g>>8)-int(want.G)) <= tolerance &&
				abs(int(bl>>8)-int(want.B)) <= tolerance {
				return true
			}
		}
		return false
	}
	mask := make([]bool, w*h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			mask[y*w+x] = near(img.At(b.Min.X+x, b.Min.Y+y))
		}
	}
	var regions []pixelRegion
	var stack []int
	for i, on := range mask {
		if !on {
			continue
		}
		r := pixelRegion{minX: i % w, minY: i / w, maxX: i % w, maxY: i / w}
		mask[i] = false
		stack = append(stack[:0], i)
		for len(stack) > 0 {
			p := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			x, y := p%w, p/w
			r.pixels++
			r.minX, r.maxX, r.minY, r.maxY = min(r.minX, x), max(r.maxX, x), min(r.minY, y), max(r.maxY, y)
			for dy := -1; dy <= 1; dy++ {
				for dx := -1; dx <= 1; dx++ {
					nx, ny := x+dx, y+dy
					if nx >= 0 && nx < w && ny >= 0 && ny < h && mask[ny*w+nx] {
						mask[ny*w+nx] = false
						stack = append(stack, ny*w+nx)
					}
				}
			}
		}
		regions = append(regions, r)
	}
	return regions
}

// TestStatusPageLoadsNoExternalAssets reads the page as the node serves
// it: its styles and script are inline, and nothing in it (a script or
// style sheet, an image, a font, an @import, a fetch) points off the
// node, so the page works on an edge network with no way out and leaks
// no visit to a third party.
func TestStatusPageLoadsNoExternalAssets(t *testing.T) {
	srv, err := ops.StartHTTP(ops.HTTPConfig{Listen: "127.0.0.1:0", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	resp, err := http.Get("http://" + srv.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %v %v", resp.Status, err)
	}
	page := string(body)
	if !strings.Contains(page, "<title>Ledge status</title>") {
		t.Fatal("the served page is not the status page")
	}
	for what, re := range map[string]string{
		"an absolute or scheme-relative src or href": `(?i)\b(src|href|srcset|action|poster|data)\s*=\s*["']?\s*([a-z][a-z0-9+.-]*:)?//`,
		"an absolute or scheme-relative url()":       `(?i)url\(\s*["']?\s*([a-z][a-z0-9+.-]*:)?//`,
		"an @import":                                 `(?i)@import`,
		"a fetch, XHR or socket off the node":        `(?i)(fetch|open|WebSocket|EventSource)\(\s*(["'][A-Z]+["']\s*,\s*)?["']([a-z][a-z0-9+.-]*:)?//`,
		"a script or style sheet by reference":       `(?i)<script[^>]+\bsrc\b|<link[^>]+\brel\s*=\s*["']?(stylesheet|preload|modulepreload|icon)`,
	} {
		if m := regexp.MustCompile(re).FindString(page); m != "" {
			t.Errorf("the page loads %s: %q", what, m)
		}
	}
}
