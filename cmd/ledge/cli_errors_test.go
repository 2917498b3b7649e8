package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/sdk"
)

// Errors a user sees: one sentence in the CLI's words, saying what to do,
// with no package prefixes and no repetition.
func TestCLIErrorsSpeakTheCLIsWords(t *testing.T) {
	n := serve(t, t.TempDir())
	n.mustRun(t, "", "topic", "create", "demo")

	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"topic", "describe", "nosuch"}, "topic nosuch does not exist: ledge topic list shows the topics, ledge topic create nosuch makes it"},
		{"x\n", []string{"produce", "nosuch"}, "topic nosuch does not exist: ledge topic list shows the topics, ledge topic create nosuch makes it"},
		{"", []string{"group", "describe", "nosuch"}, "group nosuch does not exist: ledge group list shows the groups"},
		{"", []string{"topic", "create", "bad name!"}, `topic name "bad name!": only letters, digits, '.', '_' and '-' are allowed`},
		{"", []string{"consume", "demo", "--partition", "7"}, "topic demo has no partition 7: ledge topic describe demo lists its partitions"},
		{"", []string{"topic", "create", "demo"}, "topic demo already exists: ledge topic describe demo shows it"},
		{"", []string{"topic", "list", "--token-file", "/nonexistent/token"}, "/nonexistent/token does not exist: check --data-dir, --ca and --token-file"},
		{"", []string{"uplink", "add", "demo", "--kafka", "k:9092", "--to", "edge", "--sasl-mechanism", "PLAIN", "--sasl-user", "u"},
			"--sasl-user needs --sasl-password-file"},
		{"", []string{"group", "delete", "nosuch", "--yes"}, "group nosuch does not exist: ledge group list shows the groups"},
		{"", []string{"plugin", "remove", "nosuch"},
			"plugin nosuch does not exist: ledge plugin list shows the plugins, ledge plugin add nosuch FILE.wasm registers one"},
		{"", []string{"consume", "demo", "--filter", "nosuch"},
			"plugin nosuch does not exist: ledge plugin list shows the plugins, ledge plugin add nosuch FILE.wasm registers one"},
		{"", []string{"plugin", "add", "x", "/nonexistent/x.wasm"},
			"the module /nonexistent/x.wasm does not exist: give the path of a .wasm file (ledge plugin build NAME writes NAME/NAME.wasm)"},
		{"", []string{"token", "revoke", "abc"}, "token abc does not exist: ledge token list shows the tokens' ids"},
		{"", []string{"state", "get", "counter", "nosuch", "0"},
			"topic nosuch does not exist: ledge topic list shows the topics, ledge topic create nosuch makes it"},
		{"", []string{"consume", "demo", "--partition", "-1"}, "--partition -1: partitions are numbered from 0 up (ledge topic describe demo lists them)"},
	} {
		_, errOut, err := n.run(t, tc.stdin, tc.args...)
		if err == nil {
			t.Errorf("ledge %s succeeded", strings.Join(tc.args, " "))
			continue
		}
		if !strings.HasPrefix(errOut, "ledge: "+tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("ledge %s:\n%s\nwant one line starting with %q", strings.Join(tc.args, " "), errOut, tc.want)
		}
		for _, leak := range []string{"sdk:", "node:", "WithToken", "invalid argument: invalid argument"} {
			if strings.Contains(errOut, leak) {
				t.Errorf("ledge %s leaks %q: %s", strings.Join(tc.args, " "), leak, errOut)
			}
		}
	}

	// Out of the node's directory, with no credentials anywhere.
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	cmd := ledgeCmd(ctx, "topic", "list", "--server", n.addr)
	cmd.Dir = t.TempDir()
	out, _ := cmd.CombinedOutput()
	if want := "ledge: " + noTokenHelp + "\n"; string(out) != want {
		t.Errorf("no token: %q, want %q", out, want)
	}

	// --token-file keeps the secret out of the command line.
	if out := n.mustRun(t, "", "topic", "list", "--data-dir", "", "--ca", filepath.Join("ledge-data", "tls", "ca.pem"),
		"--token-file", filepath.Join("ledge-data", "admin.token")); !strings.Contains(out, "demo") {
		t.Errorf("topic list with --token-file:\n%s", out)
	}
	if out := n.mustRun(t, "x\n", "produce", "demo"); out != "" {
		t.Errorf("produce printed %q on stdout", out)
	}
	if _, errOut, _ := n.run(t, "x\n", "produce", "demo"); errOut != "produced 1 record to demo\n" {
		t.Errorf("produce said %q", errOut)
	}
}

// With no node at the address, the CLI says so at once, in words that
// point at ledge serve and at where the address came from.
func TestNoNodeAnswered(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close() // nothing listens there now

	dir := t.TempDir()
	n := &servedNode{addr: addr, dir: dir}
	_, errOut, err := n.run(t, "", "topic", "list", "--token", "x")
	if want := "ledge: nothing listens at " + addr + " (LEDGE_SERVER): is `ledge serve` running, and is LEDGE_SERVER its --listen address?\n"; err == nil || errOut != want {
		t.Errorf("err %v, stderr %q, want %q", err, errOut, want)
	}
}

// consume --from OFFSET outside a partition's records: past the end, a
// plain consume fails naming the next offset and --follow waits for it;
// below the start, it fails naming the start unless --reset says where
// to go.
func TestConsumeFromOutOfRange(t *testing.T) {
	n := serve(t, t.TempDir())
	n.mustRun(t, "", "topic", "create", "demo")
	n.mustRun(t, "a\nb\nc\nd\ne\n", "produce", "demo")

	_, errOut, err := n.run(t, "", "consume", "demo", "--from", "6")
	if want := "ledge: offset 6 is past the end of demo/0 (next offset 5): --follow waits for it\n"; err == nil || errOut != want {
		t.Errorf("--from 6: err %v, stderr %q, want %q", err, errOut, want)
	}
	if out := n.mustRun(t, "", "consume", "demo", "--from", "5"); out != "" {
		t.Errorf("--from 5 (the end) printed %q", out)
	}
	if out := n.mustRun(t, "", "consume", "demo", "--from", "3"); out != "d\ne\n" {
		t.Errorf("--from 3 printed %q", out)
	}

	n.mustRun(t, "", "topic", "purge", "demo", "--yes")
	n.mustRun(t, "f\ng\n", "produce", "demo")
	_, errOut, err = n.run(t, "", "consume", "demo", "--from", "2")
	if want := "ledge: offset 2 is below the start of demo/0 (first offset 5): use --from earliest, or --reset earliest or latest\n"; err == nil || errOut != want {
		t.Errorf("--from 2 after a purge: err %v, stderr %q, want %q", err, errOut, want)
	}
	if out := n.mustRun(t, "", "consume", "demo", "--from", "2", "--reset", "earliest"); out != "f\ng\n" {
		t.Errorf("--from 2 --reset earliest printed %q", out)
	}
	if out := n.mustRun(t, "", "consume", "demo", "--from", "2", "--reset", "latest"); out != "" {
		t.Errorf("--from 2 --reset latest printed %q, want nothing (only records produced from now on)", out)
	}

	// --follow waits for offset 9 (the end is 7): whether the records come
	// before or after it starts, it prints from offset 9 on.
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	follow := ledgeCmd(ctx, "consume", "demo", "--from", "9", "--follow", "--count", "1")
	follow.Dir = n.dir
	follow.Env = append(follow.Env, "LEDGE_SERVER="+n.addr)
	var out, errBuf bytes.Buffer
	follow.Stdout, follow.Stderr = &out, &errBuf
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	n.mustRun(t, "h\ni\nj\n", "produce", "demo")
	if err := follow.Wait(); err != nil || out.String() != "j\n" {
		t.Errorf("--from 9 --follow: err %v, printed %q, stderr %q; want j (offset 9)", err, out.String(), errBuf.String())
	}
}

// fakeTerminal is standard input that says it is a terminal.
type fakeTerminal struct{ *strings.Reader }

func (fakeTerminal) IsTerminal() bool { return true }

// Destructive commands ask on a terminal; "n" changes nothing, "y" and
// --yes go ahead, and a script (no terminal) is not asked.
func TestDestructiveCommandsAskFirst(t *testing.T) {
	n := serve(t, t.TempDir())
	n.mustRun(t, "", "topic", "create", "keep")
	n.mustRun(t, "", "topic", "create", "gone")
	n.mustRun(t, "", "topic", "create", "scripted")

	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	run := func(answer string, args ...string) (string, error) {
		t.Helper()
		if err := os.Chdir(n.dir); err != nil {
			t.Fatal(err)
		}
		defer os.Chdir(wd)
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetIn(fakeTerminal{strings.NewReader(answer)})
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append(args, "--server", n.addr))
		err := cmd.Execute()
		return out.String(), err
	}
	out, err := run("n\n", "topic", "delete", "keep")
	if err != errNotConfirmed || !strings.Contains(out, "Delete topic keep with all its records, committed offsets and sessions? [y/N]") {
		t.Errorf("answered n: err %v\n%s", err, out)
	}
	if _, err := run("", "topic", "purge", "keep"); err != errNotConfirmed {
		t.Errorf("purge with no answer: %v", err)
	}
	if _, err := run("n\n", "group", "delete", "g"); err != errNotConfirmed {
		t.Errorf("group delete answered n: %v", err)
	}
	if out, err := run("y\n", "topic", "delete", "gone"); err != nil || !strings.Contains(out, "deleted topic gone") {
		t.Errorf("answered y: %v\n%s", err, out)
	}
	if out, err := run("", "topic", "purge", "keep", "--yes"); err != nil || !strings.Contains(out, "purged keep") {
		t.Errorf("--yes: %v\n%s", err, out)
	}
	// Not a terminal: nothing is asked, and nothing done without --yes.
	if _, errOut, err := n.run(t, "", "topic", "delete", "scripted"); err == nil ||
		errOut != "ledge: nothing was changed: standard input is not a terminal to ask on, pass --yes to go ahead\n" {
		t.Errorf("topic delete without a terminal nor --yes: err %v, stderr %q", err, errOut)
	}
	// /dev/null is a character device, not a terminal.
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	fromNull := ledgeCmd(context.Background(), "topic", "delete", "scripted", "--server", n.addr)
	fromNull.Dir, fromNull.Stdin = n.dir, devNull
	if out, err := fromNull.CombinedOutput(); err == nil || strings.Contains(string(out), "[y/N]") || !strings.Contains(string(out), "pass --yes") {
		t.Errorf("topic delete with stdin /dev/null: %v\n%s", err, out)
	}
	n.mustRun(t, "", "topic", "delete", "scripted", "--yes")
	// A topic that does not exist is said before anyone is asked.
	if out, err := run("y\n", "topic", "delete", "never"); err == nil || strings.Contains(out, "[y/N]") ||
		!strings.Contains(explain(err), "topic never does not exist") {
		t.Errorf("topic delete of a missing topic: %v\n%s", err, out)
	}
	list := n.mustRun(t, "", "topic", "list")
	if !strings.Contains(list, "keep") || strings.Contains(list, "gone") || strings.Contains(list, "scripted") {
		t.Errorf("topic list after the answers:\n%s", list)
	}
}

// A plugin's failed call is said once: the plugin, what it did, where,
// and the host's detail, in place of the status and the host's sentinel
// repeating it.
func TestExplainPluginFailures(t *testing.T) {
	for _, tc := range []struct {
		status sdk.Error
		want   string
	}{
		{sdk.Error{Status: sdk.ErrPluginTrap, Message: `plugins: plugin trapped: "x": ledge_filter: wasm error: unreachable`},
			`plugin x trapped on T/0: ledge_filter: wasm error: unreachable`},
		{sdk.Error{Status: sdk.ErrPluginInvalidAnswer, Message: `plugins: invalid plugin answer: "x": ledge_filter returned 7 (0 or a negative error code expected)`},
			`plugin x answered outside the plugin ABI on T/0: ledge_filter returned 7 (0 or a negative error code expected)`},
		{sdk.Error{Status: sdk.ErrPluginMemoryLimit, Message: `plugins: plugin memory limit exceeded: "x" grew its memory past 64 MiB, the limit of one instance`},
			`plugin x ran out of memory on T/0: it grew its memory past 64 MiB, the limit of one instance`},
		{sdk.Error{Status: sdk.ErrPluginError, Message: `plugins: plugin reported an error: "x": ledge_filter: record 3 is not JSON`},
			`plugin x failed on T/0: ledge_filter: record 3 is not JSON`},
	} {
		e := tc.status
		e.Op, e.Topic, e.Partition = "poll", "T", 0
		if got := explain(&e); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", e.Error(), got, tc.want)
		}
	}
}

func TestCleanDropsPrefixesAndRepetition(t *testing.T) {
	for in, want := range map[string]string{
		"create-topic x: invalid argument: invalid argument: name": "create-topic x: invalid argument: name",
		"sdk: sdk: the consumer has no name":                       "the consumer has no name",
		"poll: node: unknown topic: \"x\"":                         "poll: unknown topic: \"x\"",
		"plain":                                                    "plain",
	} {
		if got := clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
}
