package sdk

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgemq/ledge/transport/quic/certs"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestFindDataDirFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, AdminTokenFile), " secret\n")
	ca, err := certs.NewEphemeral("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "tls", certs.CAFile), string(ca.CA.CertPEM()))
	f, err := FindDataDirFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.CA != filepath.Join(dir, "tls", certs.CAFile) || f.AdminToken != filepath.Join(dir, AdminTokenFile) {
		t.Fatalf("found %+v", f)
	}

	cfg := defaultClientConfig()
	WithDataDir(dir).apply(&cfg)
	tlsConf, token, err := cfg.credentials("127.0.0.1:7420")
	if err != nil {
		t.Fatal(err)
	}
	if token != "secret" || tlsConf.RootCAs == nil || tlsConf.ServerName != "127.0.0.1" {
		t.Fatalf("token %q, roots %v, server name %q", token, tlsConf.RootCAs, tlsConf.ServerName)
	}
	// Explicit options win over the data directory.
	WithToken("explicit").apply(&cfg)
	WithServerName("node.example").apply(&cfg)
	if tlsConf, token, err = cfg.credentials("127.0.0.1:7420"); err != nil || token != "explicit" || tlsConf.ServerName != "node.example" {
		t.Fatalf("token %q, server name %q, %v", token, tlsConf.ServerName, err)
	}
}

func TestCredentialsWithoutDataDir(t *testing.T) {
	t.Chdir(t.TempDir()) // no ./ledge-data here
	cfg := defaultClientConfig()
	if _, _, err := cfg.credentials("h:1"); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("no token anywhere: %v", err)
	}
	WithToken("t").apply(&cfg)
	if c, tok, err := cfg.credentials("h:1"); err != nil || tok != "t" || c.RootCAs != nil {
		t.Fatalf("token only: %q %v", tok, err)
	}
	// A data directory named explicitly must exist.
	WithDataDir("missing").apply(&cfg)
	if _, _, err := cfg.credentials("h:1"); err == nil {
		t.Fatal("a missing explicit data directory is not an error")
	}
	// A token file is read and trimmed.
	path := filepath.Join(t.TempDir(), "tok")
	writeFile(t, path, "\tfrom-file \n")
	cfg = defaultClientConfig()
	WithTokenFile(path).apply(&cfg)
	if _, tok, err := cfg.credentials("h:1"); err != nil || tok != "from-file" {
		t.Fatalf("token file: %q %v", tok, err)
	}
}

func TestOptionDefaults(t *testing.T) {
	c := defaultClientConfig()
	WithDialTimeout(-1).apply(&c)
	WithRequestTimeout(0).apply(&c)
	WithLogger(nil).apply(&c)
	if c.dialTimeout != DefaultDialTimeout || c.requestTimeout != DefaultRequestTimeout || c.logger == nil || c.dataDir != DefaultDataDir {
		t.Fatalf("client defaults: %+v", c)
	}
	p := defaultProducerConfig()
	for _, o := range []ProducerOption{WithMaxBatchRecords(0), WithMaxBatchBytes(10), WithMaxInFlight(-1),
		WithMaxBufferedRecords(0), WithDeliveryTimeout(0), WithRetryBackoff(0), WithPartitioner(nil), WithLinger(-5)} {
		o.applyProducer(&p)
	}
	if p.maxBatchRecords != DefaultMaxBatchRecords || p.maxBatchBytes != DefaultMaxBatchBytes || p.maxInFlight != DefaultMaxInFlight ||
		p.maxBuffered != DefaultMaxBufferedRecords || p.deliveryTimeout != DefaultDeliveryTimeout ||
		p.retryBackoff != DefaultRetryBackoff || p.partitioner != nil || p.linger != 0 || !p.idempotent {
		t.Fatalf("producer defaults: %+v", p)
	}
	k := defaultConsumerConfig()
	WithMaxMessages(0).applyConsumer(&k)
	WithMaxBytes(-1).applyConsumer(&k)
	if k.maxMessages != DefaultMaxMessages || k.maxBytes != DefaultMaxPollBytes || k.maxWait != DefaultMaxWait || k.autoCommit != AutoCommitNone {
		t.Fatalf("consumer defaults: %+v", k)
	}
	WithMaxWait(-time.Second).applyConsumer(&k)
	if k.maxWait != 0 {
		t.Fatalf("a negative max wait is %v, want 0 (answer at once)", k.maxWait)
	}
}
