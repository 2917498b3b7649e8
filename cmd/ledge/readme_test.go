//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/internal/testtool"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestReadmeRunsAsWritten walks the README as a new user would, on a copy
// of the repository as a clone holds it, with no LEDGE_* variable of the
// developer's: every command of "Two commands", the Quickstart, "Beyond
// one consumer" and the plugin section runs as written, through a shell
// in the copy's root, and the plugin section runs again for each
// language and kind its comment offers, the commit policy attached both
// ways the prose gives. Three things differ, and only in where things
// are: the node listens on free ports (LEDGE_LISTEN and
// LEDGE_HTTP_LISTEN for serve, LEDGE_SERVER and LEDGE_HTTP_ADDR for the
// CLI, all documented), the uplink's Kafka is an in-process kfake cluster
// instead of broker:9092, and the README's Ctrl-C is a SIGINT to the
// command's process group, as a terminal sends it.
//
// Not walked: `go test ./...`, which is what runs this test; `cd bench &&
// go run ./cmd/compare`, a minute even with --quick, which .ci/run's bench
// step runs on every CI run; sdk.Dial beside ./ledge-data, whose examples
// `go test ./sdk` runs against a node it starts. The prose's `ledge bench
// produce|consume|fleet` run with small counts (a few seconds in all).
func TestReadmeRunsAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and a plugin in a copy of the repository")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	twoCommands := readmeCommands(readme, "## Two commands")
	pluginSection := readmeCommands(readme, "## A filter plugin")
	commands := readmeCommands(readme, "## Quickstart", "## Beyond one consumer", "## A filter plugin")
	if len(twoCommands) != 2 || len(pluginSection) < 6 || len(commands) < 15 {
		t.Fatalf("found %d, %d and %d commands in the README's sections: did a heading change?\n%s",
			len(twoCommands), len(pluginSection), len(commands), strings.Join(append(twoCommands, commands...), "\n"))
	}

	kafka, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "edge.demo"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)

	w := &readmeWalk{t: t, readme: readme, dir: copyOfRepository(t, root), ran: map[string]string{}}
	var cancel context.CancelFunc
	w.ctx, cancel = context.WithTimeout(context.Background(), 10*safety)
	defer cancel()
	w.env = append(withoutLedgeEnv(os.Environ()), "TMPDIR="+t.TempDir())
	kafkaAddr := kafka.ListenAddrs()[0]

	// Two commands: the first serve creates ./ledge-data and says where
	// its files are; the node answers, and stops at Ctrl-C.
	for _, line := range twoCommands {
		switch line {
		case "go test ./...":
			// The README's test command is what runs this test.
		case "go run ./cmd/ledge serve":
			n := w.goRunServe(line)
			for _, file := range []string{"ledge-data/tls/ca.pem", "ledge-data/tls/server.pem", "ledge-data/admin.token"} {
				if _, err := os.Stat(filepath.Join(w.dir, file)); err != nil {
					t.Errorf("the first serve did not create %s: %v", file, err)
				}
				if !strings.Contains(n.stdout.String(), file) {
					t.Errorf("the first serve does not say where %s is:\n%s", file, n.stdout.String())
				}
			}
			n.stop()
		default:
			t.Fatalf("the Two commands block runs %q, which this walk does not know", line)
		}
	}

	for _, line := range commands {
		switch {
		case line == "go run ./cmd/ledge serve":
			n := w.goRunServe(line)
			t.Cleanup(n.stop)
			w.env = append(w.env, "LEDGE_SERVER="+n.addr, "LEDGE_HTTP_ADDR="+n.http)
			w.node = n
		case w.node == nil && !strings.HasPrefix(line, "go build "):
			t.Fatalf("%q comes before the node is started", line)
		case strings.Contains(line, "--follow"):
			w.ran[line] = w.follow(line, func(stdout, _ string) bool { return strings.HasSuffix(stdout, "world\n") }).stop()
		default:
			w.ran[line] = w.sh(strings.ReplaceAll(line, "broker:9092", kafkaAddr))
		}
	}

	// What the README promises these commands show.
	for prefix, want := range map[string]string{
		"./ledge consume demo --from earliest":                    "hello\nworld\n",
		"./ledge consume demo --consumer me --commit --follow":    "hello\nworld\n",
		"./ledge consume demo --group audit":                      "hello\nworld\n",
		"./ledge state get counter demo 0":                        "group counter has no state on demo/0",
		"./ledge status":                                          "demo",
		"./ledge plugin test only-errors":                         "ok: 6 verdicts",
		"./ledge consume demo --filter only-errors --param field": "{\"level\":\"error\",\"msg\":\"disk full\"}\n",
	} {
		if out, ok := w.output(prefix); !ok {
			t.Errorf("the README no longer runs %q", prefix)
		} else if !strings.Contains(out, want) {
			t.Errorf("%s printed\n%s\nwant %q", prefix, out, want)
		}
	}
	// The group consumer above read to the end and left: the group has
	// no member, and its commit is where the member stopped.
	if out, ok := w.output("./ledge group describe audit"); !ok {
		t.Error("the README no longer runs ./ledge group describe audit")
	} else {
		for _, want := range []string{`group audit: empty, epoch \d+, \S+ assignor, 0 members`, `(?m)^demo\s+0\s+2 \(history 1\)\s+2\s+0\s+-\s*$`} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("./ledge group describe audit printed\n%s\nwant /%s/", out, want)
			}
		}
	}
	w.describeALiveMember()

	// The Go project found the checkout it was created in, by walking up
	// from itself, as it does in a clone.
	if mod, err := os.ReadFile(filepath.Join(w.dir, "only-errors", "go.mod")); err != nil || !strings.Contains(string(mod), "replace github.com/ledgemq/ledge => ..\n") {
		t.Errorf("only-errors/go.mod does not build against the clone it sits in (%v):\n%s", err, mod)
	}
	if out, _ := w.output("./ledge consume demo --filter only-errors"); !onlyErrors(out) {
		t.Errorf("the filter let through records it drops:\n%s", out)
	}

	// The plugin section again, in each other language its first line
	// offers, under its own name.
	if !strings.Contains(readme, "--lang go    # or --lang assemblyscript, wat") {
		t.Error("the plugin section no longer offers --lang assemblyscript and wat: update this walk")
	}
	for _, alt := range []struct{ lang, tool, hint string }{
		{"assemblyscript", "npm", "Debian: apt-get install -y nodejs npm"},
		{"wat", "wat2wasm", "Debian: apt-get install -y wabt"},
	} {
		t.Run(alt.lang, func(t *testing.T) {
			testtool.Need(t, alt.hint, alt.tool)
			name := "only-errors-" + alt.lang
			var filtered string
			for _, line := range pluginSection {
				line = strings.ReplaceAll(strings.ReplaceAll(line, "--lang go", "--lang "+alt.lang), "only-errors", name)
				out := w.sub(t).sh(line)
				if strings.HasPrefix(line, "./ledge plugin test") && !strings.Contains(out, "ok: 6 verdicts") {
					t.Errorf("%s printed\n%s\nwant ok: 6 verdicts", line, out)
				}
				if strings.Contains(line, "--filter") {
					filtered = out
				}
			}
			if !onlyErrors(filtered) {
				t.Errorf("the %s filter let through records it drops, or kept none:\n%s", alt.lang, filtered)
			}
		})
	}

	// The other kind the first line offers, attached both ways the prose
	// gives.
	setPolicy, consumePolicy := "`./ledge group set-policy GROUP NAME`", "`./ledge consume TOPIC --consumer NAME --commit-policy NAME`"
	if !strings.Contains(readme, "; or --kind commit-policy") || !strings.Contains(readme, setPolicy) || !strings.Contains(readme, consumePolicy) {
		t.Error("the plugin section no longer offers --kind commit-policy and the two ways to attach one: update this walk")
	}
	t.Run("commit-policy", func(t *testing.T) {
		s := w.sub(t)
		for _, line := range pluginSection {
			if !strings.HasPrefix(line, "./ledge plugin ") {
				continue // the filter's produce and consume
			}
			line = strings.ReplaceAll(strings.ReplaceAll(line, "--kind filter", "--kind commit-policy"), "only-errors", "checkpoint")
			if out := s.sh(line); strings.HasPrefix(line, "./ledge plugin test") && !strings.Contains(out, "ok: 1 proposal") {
				t.Errorf("%s printed\n%s\nwant ok: 1 proposal", line, out)
			}
		}
		set := strings.NewReplacer("`", "", "GROUP", "audit", "NAME", "checkpoint").Replace(setPolicy)
		if out := s.sh(set); !strings.Contains(out, "commit policy checkpoint") {
			t.Errorf("%s printed\n%s\nwant it to name the policy", set, out)
		}
		if out := s.sh("./ledge group describe audit"); !strings.Contains(out, "checkpoint") {
			t.Errorf("./ledge group describe audit does not show the policy set:\n%s", out)
		}
		s.sh(strings.NewReplacer("`", "", "TOPIC", "demo", "--consumer NAME", "--consumer me", "NAME", "checkpoint").Replace(consumePolicy))
	})

	w.bench()
}

// readmeWalk is the state of a walk: the copy it runs in, the environment
// of its commands and the node they talk to.
type readmeWalk struct {
	t      *testing.T
	ctx    context.Context
	readme string
	dir    string
	env    []string
	node   *goRunNode
	ran    map[string]string // command line -> what it printed
}

// sub is the walk reporting to a subtest.
func (w *readmeWalk) sub(t *testing.T) *readmeWalk {
	c := *w
	c.t = t
	return &c
}

// output returns what the command starting with prefix printed.
func (w *readmeWalk) output(prefix string) (string, bool) {
	for line, out := range w.ran {
		if strings.HasPrefix(line, prefix) {
			return out, true
		}
	}
	return "", false
}

// sh runs line through a shell in the copy and returns its standard
// output; it fails the test if the command fails.
func (w *readmeWalk) sh(line string) string {
	w.t.Helper()
	cmd := exec.CommandContext(w.ctx, "sh", "-c", line)
	cmd.Dir, cmd.Env = w.dir, w.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		hint := ""
		if strings.HasPrefix(line, "go ") {
			hint = "\n(the walk runs on the files git tracks, as a clone would: git add a new file the change needs)"
		}
		w.t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s%s", line, err, stdout.String(), stderr.String(), hint)
	}
	return stdout.String()
}

// describeALiveMember checks what `group describe` promises beyond the
// README's run, whose member has left by then: while the README's group
// consumer follows the topic, describe names it by its client id (the
// program and its pid) and the host it connects from, with its partition.
func (w *readmeWalk) describeALiveMember() {
	t := w.t
	member := w.follow("./ledge consume demo --group audit --follow", func(_, stderr string) bool {
		return strings.Contains(stderr, "assigned demo/0")
	})
	out := w.sh("./ledge group describe audit")
	member.stop()
	for _, want := range []string{
		`group audit: stable, epoch \d+, \S+ assignor, 1 member\n`,
		fmt.Sprintf(`(?m)^[0-9a-f]{8}\s+ledge-%d\s+127\.0\.0\.1\s+\d+\s+demo/0\(\d+\)`, member.cmd.Process.Pid),
		`(?m)^demo\s+0\s+\d+ \(history 1\)\s+\d+\s+0\s+[0-9a-f]{8}\s*$`, // it read to the end
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("./ledge group describe audit, with a member following, printed\n%s\nwant /%s/", out, want)
		}
	}
}

// bench runs the README's `ledge bench produce|consume|fleet` with small
// counts, against the in-process node they start without LEDGE_SERVER.
func (w *readmeWalk) bench() {
	t := w.t
	b := *w
	b.env = withoutLedgeEnv(w.env)
	for _, c := range []struct{ line, flags, want string }{
		{"ledge bench produce", "--count 2000 --ceiling-duration 100ms", "msgs/s"},
		{"ledge bench consume", "--count 2000 --ceiling-duration 100ms", "msgs/s"},
		{"ledge bench fleet", "--devices 4 --cmd-partitions 2 --warmup 0 --duration 1s --ceiling-duration 0", "4 connected of 4"},
	} {
		if !strings.Contains(w.readme, "`"+c.line+"`") {
			t.Errorf("the README no longer mentions `%s`: update this walk", c.line)
			continue
		}
		out := b.sh("./" + c.line + " " + c.flags)
		if !strings.Contains(out, c.want) || regexp.MustCompile(`errors?:\s+[1-9]`).MatchString(out) {
			t.Errorf("./%s %s printed\n%s\nwant %q and no errors", c.line, c.flags, out, c.want)
		}
	}
}

// onlyErrors reports whether out holds the filtered demo records: at
// least one, and each the error record.
func onlyErrors(out string) bool {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, l := range lines {
		if l != `{"level":"error","msg":"disk full"}` {
			return false
		}
	}
	return out != ""
}

// readmeCommands returns the command lines of the sh blocks of the named
// sections, without their comments.
func readmeCommands(readme string, sections ...string) []string {
	comment := regexp.MustCompile(`\s+#\s.*$`)
	var out []string
	var inSection, inBlock bool
	sc := bufio.NewScanner(strings.NewReader(readme))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inSection = false
			for _, s := range sections {
				inSection = inSection || strings.HasPrefix(line, s)
			}
		case inSection && line == "```sh":
			inBlock = true
		case inBlock && line == "```":
			inBlock = false
		case inBlock:
			if cmd := strings.TrimSpace(comment.ReplaceAllString(line, "")); cmd != "" {
				out = append(out, cmd)
			}
		}
	}
	return out
}
