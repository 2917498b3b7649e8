package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/sdk"
)

// TestGroupsThroughCLI consumes as a group member at most once, attaches
// a commit policy to a group and deletes the group.
func TestGroupsThroughCLI(t *testing.T) {
	n := serve(t, t.TempDir())
	n.mustRun(t, "", "topic", "create", "orders", "--partitions", "2")
	n.mustRun(t, "a\nb\nc\n", "produce", "orders")

	committed := func(group string) uint64 {
		t.Helper()
		var d struct {
			Policy       string            `json:"policy"`
			PolicyParams map[string]string `json:"policy_params"`
			Offsets      []struct {
				Committed *uint64 `json:"committed"`
			} `json:"offsets"`
		}
		if err := json.Unmarshal([]byte(n.mustRun(t, "", "group", "describe", group, "--json")), &d); err != nil {
			t.Fatal(err)
		}
		var total uint64
		for _, o := range d.Offsets {
			if o.Committed != nil {
				total += *o.Committed
			}
		}
		return total
	}

	// At most once: what a poll returned is committed before it is
	// printed; a second run prints only what came after.
	out := n.mustRun(t, "", "consume", "orders", "--group", "audit", "--at-most-once")
	if got := strings.Fields(out); len(got) != 3 {
		t.Fatalf("first consume printed %q", out)
	}
	if c := committed("audit"); c != 3 {
		t.Fatalf("committed %d records over the partitions, want 3", c)
	}
	n.mustRun(t, "d\n", "produce", "orders")
	if out := n.mustRun(t, "", "consume", "orders", "--group", "audit", "--at-most-once"); out != "d\n" {
		t.Fatalf("second consume printed %q", out)
	}
	// With --count, the difference shows: at most once, what the poll
	// returned past the count was committed and is never printed; at
	// least once, it is printed by the next run.
	n.mustRun(t, "", "topic", "create", "one")
	n.mustRun(t, "x\ny\nz\n", "produce", "one")
	for _, c := range []struct {
		group string
		flags []string
		rest  string
	}{
		{"amo", []string{"--at-most-once"}, ""},
		{"alo", nil, "y\nz\n"},
		// Commit by policy, with no policy on the group: nothing was
		// committed, the next run prints everything again.
		{"bypolicy", []string{"--commit-by-policy"}, "x\ny\nz\n"},
	} {
		args := append([]string{"consume", "one", "--group", c.group, "--count", "1"}, c.flags...)
		if out := n.mustRun(t, "", args...); out != "x\n" {
			t.Fatalf("%s: first consume printed %q", c.group, out)
		}
		if out := n.mustRun(t, "", "consume", "one", "--group", c.group); out != c.rest {
			t.Fatalf("%s: second consume printed %q, want %q", c.group, out, c.rest)
		}
	}
	_, errOut, err := n.run(t, "", "consume", "orders", "--at-most-once")
	if err == nil || !strings.Contains(errOut, "--at-most-once needs --group") {
		t.Fatalf("--at-most-once without --group: err %v, stderr %q", err, errOut)
	}

	_, errOut, err = n.run(t, "", "consume", "orders", "--group", "g", "--at-most-once", "--commit-by-policy")
	if err == nil || !strings.Contains(errOut, "exclude each other") {
		t.Fatalf("--at-most-once with --commit-by-policy: err %v, stderr %q", err, errOut)
	}

	// Policies: an unknown plugin is refused; --clear detaches.
	_, errOut, err = n.run(t, "", "group", "set-policy", "audit", "nope")
	if err == nil || !strings.Contains(errOut, "plugin nope does not exist: ledge plugin list shows the plugins") {
		t.Fatalf("set-policy with an unknown plugin: err %v, stderr %q", err, errOut)
	}
	if goBin, err := exec.LookPath("go"); err == nil {
		wasm := filepath.Join(t.TempDir(), "checkpoint.wasm")
		build := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", wasm, "../../sdk/plugin/examples/checkpoint")
		build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if msg, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, msg)
		}
		n.mustRun(t, "", "plugin", "add", "cp", wasm, "--kind", "commit-policy")
		if out := n.mustRun(t, "", "group", "set-policy", "audit", "cp", "--param", "header=mark"); !strings.Contains(out, "commit policy cp (header=mark)") {
			t.Fatalf("set-policy printed %q", out)
		}
		if out := n.mustRun(t, "", "group", "describe", "audit"); !strings.Contains(out, "commit policy: cp (header=mark)") {
			t.Fatalf("describe does not show the policy:\n%s", out)
		}
	} else {
		t.Logf("no go toolchain to build the checkpoint example; attaching a real policy is not tried: %v", err)
	}
	n.mustRun(t, "", "group", "set-policy", "audit", "--clear")
	if out := n.mustRun(t, "", "group", "describe", "audit"); strings.Contains(out, "commit policy") {
		t.Fatalf("describe after --clear:\n%s", out)
	}

	// Deletion removes the group and its offsets: consuming again under
	// the name starts from the beginning.
	if out := n.mustRun(t, "", "group", "delete", "audit", "--yes"); out != "group audit deleted\n" {
		t.Fatalf("delete printed %q", out)
	}
	if out := n.mustRun(t, "", "group", "list"); strings.Contains(out, "audit") {
		t.Fatalf("group list after the deletion:\n%s", out)
	}
	_, errOut, err = n.run(t, "", "group", "delete", "audit", "--yes")
	if err == nil || !strings.Contains(errOut, "group audit does not exist") {
		t.Fatalf("deleting it again: err %v, stderr %q", err, errOut)
	}
	if out := n.mustRun(t, "", "consume", "orders", "--group", "audit"); len(strings.Fields(out)) != 4 {
		t.Fatalf("consume after the deletion printed %q", out)
	}
}

// `group describe` names each member by a short id, the client id it
// joined with and the host it connects from; the per-partition rows
// carry the short id only.
func TestGroupDescribeShowsClientIDAndHost(t *testing.T) {
	dir := t.TempDir()
	n := serve(t, dir)
	n.mustRun(t, "", "topic", "create", "readings", "--partitions", "2")

	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	c, err := sdk.Dial(ctx, n.addr, sdk.WithDataDir(filepath.Join(dir, "ledge-data")))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := c.NewGroupConsumer(ctx, "sensors", []string{"readings"}, sdk.WithGroupClientID("sensor-7"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	short := g.MemberID()[:8]

	out := n.mustRun(t, "", "group", "describe", "sensors")
	var memberRow string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, short) {
			memberRow = line
			break
		}
	}
	if f := strings.Fields(memberRow); len(f) < 3 || f[0] != short || f[1] != "sensor-7" || f[2] != "127.0.0.1" {
		t.Fatalf("want a member row %q  sensor-7  127.0.0.1, got:\n%s", short, out)
	}
	if strings.Contains(out, g.MemberID()) {
		t.Fatalf("the whole member id %s is printed; the tables should carry its short form:\n%s", g.MemberID(), out)
	}

	var d struct {
		MemberList []struct {
			ID       string `json:"id"`
			ClientID string `json:"client_id"`
			Host     string `json:"host"`
		} `json:"member_list"`
	}
	if err := json.Unmarshal([]byte(n.mustRun(t, "", "group", "describe", "sensors", "--json")), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.MemberList) != 1 || d.MemberList[0].ID != g.MemberID() || d.MemberList[0].ClientID != "sensor-7" || d.MemberList[0].Host != "127.0.0.1" {
		t.Fatalf("--json members: %+v", d.MemberList)
	}
}
