package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/internal/testtool"
	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
)

// kcat runs kcat against n's Kafka listener with the admin token as the
// SASL/PLAIN password, and returns its standard output.
func kcat(t *testing.T, n *node.Node, stdin string, args ...string) string {
	t.Helper()
	bin := testtool.Need(t, "Debian package kcat", "kcat")
	ctx, cancel := context.WithTimeout(testContext(t), safety/2)
	defer cancel()
	all := append([]string{"-b", n.KafkaAddr(),
		"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
		"-X", "sasl.username=kcat", "-X", "sasl.password=" + adminToken(t, n)}, args...)
	cmd := exec.CommandContext(ctx, bin, all...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// TestKafkaKcat: kcat lists the node's topics (-L), produces lines (-P),
// reads them back (-C) and consumes them in a group (-G), committing;
// the SDK reads what kcat wrote and sees the group's commits.
func TestKafkaKcat(t *testing.T) {
	testtool.Need(t, "Debian package kcat", "kcat")
	n := startKafkaNode(t)
	ctx := testContext(t)
	c := dial(t, n)
	createTopic(t, c, "lines", sdk.TopicConfig{Partitions: 2})

	if out := kcat(t, n, "", "-L"); !strings.Contains(out, `topic "lines" with 2 partitions`) {
		t.Fatalf("kcat -L does not list the topic:\n%s", out)
	}

	want := []string{"alpha", "bravo", "charlie", "delta"}
	kcat(t, n, strings.Join(want, "\n")+"\n", "-P", "-t", "lines")

	out := kcat(t, n, "", "-C", "-t", "lines", "-o", "beginning", "-e", "-f", `%s\n`)
	got := strings.Fields(out)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("kcat -C read %q, want %q", got, want)
	}

	cons, err := c.NewConsumer(ctx, "lines")
	if err != nil {
		t.Fatal(err)
	}
	got = valuesOf(pollAll(t, cons, len(want)))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the SDK read %q of what kcat wrote, want %q", got, want)
	}

	out = kcat(t, n, "", "-G", "kcat-readers", "-c", "4", "-f", `%s\n`,
		"-X", "auto.offset.reset=earliest", "lines")
	got = strings.Fields(out)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("kcat -G read %q, want %q", got, want)
	}
	desc, err := c.DescribeGroup(ctx, "kcat-readers")
	if err != nil {
		t.Fatal(err)
	}
	var committed uint64
	for _, o := range desc.Offsets {
		committed += o.Offset
	}
	if committed != uint64(len(want)) {
		t.Fatalf("the group committed %d records in all, want %d: %+v", committed, len(want), desc.Offsets)
	}
}
