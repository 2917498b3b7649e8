package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/internal/testtool"
	"github.com/ledgemq/ledge/sdk"
)

// kafkajsDir returns a directory whose node_modules holds kafkajs:
// KAFKAJS_DIR when set, else a temporary one npm installs it into.
func kafkajsDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("KAFKAJS_DIR"); d != "" {
		return d
	}
	npm := testtool.Need(t, "Debian package npm", "npm")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(testContext(t), safety)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--silent", "kafkajs@2")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		if testtool.InCI() {
			t.Fatalf("npm install kafkajs: %v\n%s", err, out)
		}
		t.Skipf("npm install kafkajs: %v", err)
	}
	return dir
}

// TestKafkaKafkajs: a kafkajs producer writes records and a kafkajs group
// consumer reads them all, committing; Ledge's SDK reads the same records
// and sees the group's commits.
func TestKafkaKafkajs(t *testing.T) {
	nodeBin := testtool.Need(t, "Debian package nodejs", "node", "nodejs")
	dir := kafkajsDir(t)
	n := startKafkaNode(t)
	ctx := testContext(t)
	c := dial(t, n)
	createTopic(t, c, "js", sdk.TopicConfig{Partitions: 3})

	script, err := filepath.Abs(filepath.Join("testdata", "kafkajs.js"))
	if err != nil {
		t.Fatal(err)
	}
	const count = 12
	cmd := exec.CommandContext(ctx, nodeBin, script, n.KafkaAddr(), adminToken(t, n), "js", "js-readers", fmt.Sprint(count))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"), "KAFKAJS_NO_PARTITIONER_WARNING=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kafkajs: %v\n%s%s", err, out.String(), errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var got []string
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("kafkajs printed %q: %v", out.String(), err)
	}
	var want []string
	for i := range count {
		want = append(want, fmt.Sprintf("js-%d", i))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("kafkajs read %q, want %q", got, want)
	}

	cons, err := c.NewConsumer(ctx, "js")
	if err != nil {
		t.Fatal(err)
	}
	got = valuesOf(pollAll(t, cons, count))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the SDK read %q of what kafkajs wrote, want %q", got, want)
	}
	desc, err := c.DescribeGroup(ctx, "js-readers")
	if err != nil {
		t.Fatal(err)
	}
	var committed uint64
	for _, o := range desc.Offsets {
		committed += o.Offset
	}
	if committed != count {
		t.Fatalf("the group committed %d records in all, want %d: %+v", committed, count, desc.Offsets)
	}
}
