package layout_test

import (
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/ledgemq/ledge"

// A rule names packages of the module (from: a path relative to the
// module, or a tree ending in "/...") and what they must not reach: deny
// holds patterns of the same form, or of a path outside the module
// ("net", "github.com/quic-go/quic-go/..."); "*" is every package of
// the module. A package never breaks a rule through its own tree. direct
// rules look at a package's own imports only; the others at everything
// it links (go list's Deps). Only non-test files count: a test may import
// what it likes.
type rule struct {
	from   string
	deny   []string
	direct bool
	why    string
}

// netPackages are what a package that knows nothing of networks does not
// import itself (its dependencies may: pebble links net/http for its
// metrics).
var netPackages = []string{"net", "net/...", "crypto/tls", "github.com/quic-go/...",
	"github.com/twmb/franz-go/...", "github.com/tetratelabs/wazero/..."}

// testSupport are the packages only tests link: the release binary and
// every other package's non-test files stay clear of them.
var testSupport = []string{"internal/testtool", "internal/fullfs", "internal/sim", "internal/e2e",
	"internal/allocs", "internal/syncbuf", "node/owner/ownertest", "node/uplink/uplinktest",
	"node/ops/opstest"}

var rules = []rule{
	{from: "fence/...", deny: []string{"*"}, why: "fence imports nothing of ours (DESIGN.md)"},
	{from: "record/...", deny: []string{"*"}, why: "record imports nothing of ours (DESIGN.md)"},
	{from: "engine/...", deny: []string{"node/...", "transport/...", "plugins/...", "sdk/...", "cmd/...", "internal/..."},
		why: "engine knows nothing about networks, protocols, plugins or groups (DESIGN.md)"},
	{from: "engine/...", deny: netPackages, direct: true,
		why: "engine knows nothing about networks (DESIGN.md)"},
	{from: "plugins/...", deny: []string{"node/...", "engine/...", "transport/...", "sdk/...", "cmd/..."},
		why: "plugins → record (DESIGN.md)"},
	{from: "transport/wire", deny: []string{"fence/...", "engine/...", "node/...", "plugins/...", "sdk/...", "transport/quic/...", "internal/..."},
		why: "transport/wire → record: frames, no sockets (DESIGN.md)"},
	{from: "transport/wire", deny: netPackages, direct: true,
		why: "transport/wire encodes and decodes, with no sockets (DESIGN.md)"},
	{from: "transport/quic/...", deny: []string{"node/...", "engine/...", "plugins/...", "sdk/...", "fence/..."},
		why: "transport/quic → transport/wire → record (DESIGN.md)"},
	{from: "sdk/...", deny: []string{"node/...", "engine/...", "plugins", "transport/quic/certs"},
		why: "sdk never imports node, engine or server-side certificate issuing (DESIGN.md)"},
	{from: "node/owner/...", deny: []string{"node/...", "transport/...", "plugins/..."},
		why: "node/owner → {engine, fence, record}: it learns of members, logs and metadata through its interfaces (node/doc.go)"},
	{from: "node/group/...", deny: []string{"node", "node/uplink/...", "node/ops/...", "node/kafka/...", "node/session/...", "transport/quic/...", "plugins/..."},
		why: "node/group drives owners only through PartitionAssigner, and serves no request (node/doc.go)"},
	{from: "node/uplink/...", deny: []string{"node", "node/group/...", "node/ops/...", "node/kafka/...", "node/session/...", "transport/...", "plugins/..."},
		why: "node/uplink reaches a partition only through its owner, and serves no request (node/doc.go)"},
	{from: "node/downlink/...", deny: []string{"node", "node/group/...", "node/ops/...", "node/kafka/...", "node/session/...", "node/transform/...", "transport/...", "plugins/..."},
		why: "node/downlink appends to a partition only through its owner, as an idempotent producer, and serves no request (node/doc.go)"},
	{from: "node/transform/...", deny: []string{"node", "node/uplink/...", "node/ops/...", "node/kafka/...", "node/session/...", "node/pluginreg/...", "node/tokens/...", "transport/quic/..."},
		why: "node/transform runs transforms through owners, the coordinator and the plugin host, and serves no request (node/doc.go)"},
	{from: "node/ops/...", deny: []string{"node", "node/group/...", "node/kafka/...", "node/session/..."},
		why: "node/ops reads a node only through its Source interface (node/doc.go)"},
	{from: "node/kafka/...", deny: []string{"node", "node/session/...", "node/owner/...", "node/group/...", "node/uplink/...", "node/ops/...", "transport/quic/...", "plugins/...", "engine/..."},
		why: "node/kafka never imports transport/quic, node, node/session or the owner: it owns its Session interface, which node hands it a *session.Session for (node/doc.go)"},
	{from: "node/session/...", deny: []string{"node", "node/kafka/...", "node/ops/...", "transport/quic/...", "github.com/quic-go/..."},
		why: "node/session reaches the node through its Node interface and sees no transport: QUIC and Kafka are adapters onto it (node/doc.go)"},
	{from: "node/tokens/...", deny: []string{"node", "node/group/...", "node/uplink/...", "node/ops/...", "node/kafka/...", "node/session/...", "transport/quic/...", "plugins/..."},
		why: "node/tokens is a registry in the node's metadata (owner.Metadata); it serves no request"},
	{from: "node/pluginreg/...", deny: []string{"node", "node/uplink/...", "node/ops/...", "node/kafka/...", "node/session/...", "node/tokens/...", "transport/quic/..."},
		why: "node/pluginreg keeps plugins and runs their poll steps; it serves no request"},
	{from: "internal/sim/...", deny: []string{"node", "node/kafka/...", "node/ops/...", "node/uplink/...", "transport/quic/...", "plugins/...",
		"github.com/quic-go/...", "github.com/tetratelabs/wazero/...", "github.com/twmb/franz-go/..."},
		why: "the simulator drives owners and the group coordinator, not a node with its listeners"},
	{from: "cmd/...", deny: testSupport,
		why: "the release binary links no test support (internal/fullfs only under the ledgetest build tag)"},
	{from: "*", deny: testSupport, direct: true,
		why: "test support packages are imported by _test.go files only"},
}

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func TestImportRules(t *testing.T) {
	watchSources(t)
	pkgs := goList(t)
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	matched := make([]bool, len(rules))
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		for i, r := range rules {
			if !match(r.from, from) || slices.Contains(testSupport, from) && r.from == "*" {
				continue
			}
			matched[i] = true
			reached := p.Deps
			if r.direct {
				reached = p.Imports
			}
			// One line per denied pattern, naming the first package that
			// breaks it.
			for _, d := range r.deny {
				for _, imp := range reached {
					to := rel(imp)
					if sameTree(r.from, from, to) {
						continue
					}
					if d == "*" && isOurs(imp) || d != "*" && match(d, to) && isOurs(imp) != external(d) {
						how := "links"
						if r.direct {
							how = "imports"
						}
						t.Errorf("%s %s %s: %s", from, how, to, r.why)
						break
					}
				}
			}
		}
	}
	for i, ok := range matched {
		if !ok {
			t.Errorf("rule for %s matches no package: the layout changed, so should the rule", rules[i].from)
		}
	}
}

// goList lists the module's packages with their imports, as a build for
// this machine's platform sees them.
func goList(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Deps", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// watchSources reads the module's directories and stats its Go files, so
// that go test caches this test's result only as long as they stay as they
// are: go list runs in a child process, which the cache does not follow.
func watchSources(t *testing.T) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	root := strings.TrimSpace(string(out))
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bench") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			_, err = os.Stat(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func isOurs(path string) bool { return path == module || strings.HasPrefix(path, module+"/") }

// rel is a module package's path relative to the module; other paths as
// they are.
func rel(path string) string {
	if path == module {
		return "."
	}
	return strings.TrimPrefix(path, module+"/")
}

// external reports whether a pattern names packages outside the module:
// those of the standard library, and those with a domain.
func external(pattern string) bool {
	first, _, _ := strings.Cut(pattern, "/")
	return strings.Contains(first, ".") || slices.Contains(stdRoots, first)
}

var stdRoots = []string{"net", "crypto", "os", "io", "syscall"}

// match reports whether path is pattern, or in its tree ("x/...").
func match(pattern, path string) bool {
	if pattern == "*" {
		return true
	}
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == tree || strings.HasPrefix(path, tree+"/")
	}
	return path == pattern
}

// sameTree reports whether to is in from's own tree: the rule's, or
// from's own package and its subpackages.
func sameTree(pattern, from, to string) bool {
	if pattern != "*" && strings.HasSuffix(pattern, "/...") && match(pattern, to) {
		return true
	}
	return to == from || strings.HasPrefix(to, from+"/")
}

// The Kafka listener's adapter in node reaches the node through calls
// (node/server.go), never through a QUIC type: a file of node's own
// package, so go list cannot tell, and its imports are read here.
func TestKafkaAdapterImportsNoQUIC(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", module+"/node").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "kafka_adapter.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		if p := strings.Trim(imp.Path.Value, `"`); match("transport/quic/...", rel(p)) && isOurs(p) {
			t.Errorf("node/kafka_adapter.go imports %s: the Kafka adapter calls no QUIC type", p)
		}
	}
}
