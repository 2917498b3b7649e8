package e2e

import (
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/ledgemq/ledge/internal/testtool"
)

// residentBytes is a process's resident set, from /proc.
func residentBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// TestKafkaUnauthenticatedFlood: `ledge serve` with its Kafka listener
// meets 1,000 unauthenticated connections each announcing a 100 MiB
// request, and 1,000 more that send nothing. Its resident memory grows
// by at most 50 MB, and kcat, meanwhile, produces and reads back.
func TestKafkaUnauthenticatedFlood(t *testing.T) {
	kcatBin := testtool.Need(t, "Debian package kcat", "kcat")
	if testing.Short() {
		t.Skip("builds the binary and opens 2,000 connections")
	}
	bin := buildLedge(t)
	s := newServedLedge(t, bin, t.TempDir())
	kafkaAddr := freeTCPPort(t)
	s.env = []string{"LEDGE_KAFKA_LISTEN=" + kafkaAddr}
	s.start()
	secretB, err := os.ReadFile(filepath.Join(s.dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSpace(string(secretB))
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.SASL(plain.Auth{User: "flood", Pass: secret}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	kafkaCreateTopic(t, cl, "flood", 1)
	kcat := func(stdin string, args ...string) string {
		t.Helper()
		all := append([]string{"-b", kafkaAddr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
			"-X", "sasl.username=kcat", "-X", "sasl.password=" + secret}, args...)
		cmd := exec.CommandContext(testContext(t), kcatBin, all...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("kcat %v during the flood: %v\n%s", args, err, errb.String())
		}
		return out.String()
	}
	kcat("warm\n", "-P", "-t", "flood")
	pid := s.cmd.Process.Pid
	before := residentBytes(t, pid)

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	announce := binary.BigEndian.AppendUint32(nil, 100<<20)
	announce = append(announce, 0, 18, 0, 3, 0, 0, 0, 1) // the start of an ApiVersions
	for i := range 2000 {
		c, err := net.Dial("tcp", kafkaAddr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if i%2 == 0 {
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = c.Write(announce) // the node may close it first
		}
	}
	during := residentBytes(t, pid)
	kcat("honest\n", "-P", "-t", "flood")
	if out := kcat("", "-C", "-t", "flood", "-o", "beginning", "-e", "-f", `%s\n`); out != "warm\nhonest\n" {
		t.Fatalf("kcat read %q during the flood, want warm and honest", out)
	}
	after := residentBytes(t, pid)
	t.Logf("resident: %.1f MB before, %.1f MB with 2,000 connections opened, %.1f MB after kcat's round trip",
		float64(before)/1e6, float64(during)/1e6, float64(after)/1e6)
	if grown := max(during, after) - before; grown > 50e6 {
		t.Fatalf("the flood grew the node's resident memory by %.1f MB, over 50 MB", float64(grown)/1e6)
	}
}
