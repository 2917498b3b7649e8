package certs

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func openStore(t *testing.T, dir string, c *clock, names ...string) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, Now: c.Now, Names: names})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func serial(s *Store) string { return s.Certificate().Leaf.SerialNumber.String() }

func TestFirstStartCreatesFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	c := newClock()
	s := openStore(t, dir, c)
	if !s.Created() {
		t.Fatal("first start did not report a created CA")
	}
	for path, mode := range map[string]os.FileMode{
		s.Paths().CA: certFileMode, s.Paths().CAKey: keyFileMode,
		s.Paths().Cert: certFileMode, s.Paths().CertKey: keyFileMode,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatalf("stat %s: %v", path, err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), mode)
		}
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != storeDirMode {
		t.Errorf("directory mode %v (%v), want %v", fi.Mode().Perm(), err, storeDirMode)
	}
	leaf := s.Certificate().Leaf
	if got, want := leaf.NotAfter.Sub(c.Now()), DefaultServerValidity; got != want {
		t.Errorf("server certificate valid for %v, want %v", got, want)
	}
	if got := certNames(leaf); !slices.Equal(got, canonicalNames(DefaultNames())) {
		t.Errorf("names %v, want %v", got, DefaultNames())
	}
	if s.CA().Cert.NotAfter.Sub(c.Now()) != DefaultCAValidity {
		t.Errorf("CA valid until %v", s.CA().Cert.NotAfter)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 {
		t.Errorf("directory holds %d entries, want the 4 PEM files", len(entries))
	}

	// A client trusting ca.pem verifies the server certificate for each name.
	caPEM, err := os.ReadFile(s.Paths().CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem holds no certificate")
	}
	for _, name := range []string{"localhost", "127.0.0.1", "::1"} {
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: c.Now()})
		if err != nil {
			t.Errorf("verify for %s: %v", name, err)
		}
	}
}

func TestReloadKeepsCertificate(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	first := openStore(t, dir, c)
	c.Advance(24 * time.Hour)
	second := openStore(t, dir, c)
	if second.Created() {
		t.Error("second start created a new CA")
	}
	if serial(first) != serial(second) {
		t.Error("second start reissued a valid certificate")
	}
	if !first.CA().Cert.Equal(second.CA().Cert) {
		t.Error("second start changed the CA")
	}
}

func TestRenewalAtStart(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	first := openStore(t, dir, c)
	c.Advance(DefaultServerValidity - DefaultRenewBefore + time.Second)
	second := openStore(t, dir, c)
	if serial(first) == serial(second) {
		t.Fatal("a certificate inside the renewal window was not renewed at start")
	}
	if got := second.Certificate().Leaf.NotAfter; !got.Equal(c.Now().Add(DefaultServerValidity)) {
		t.Errorf("renewed certificate expires %v", got)
	}
	third := openStore(t, dir, c)
	if serial(third) != serial(second) {
		t.Error("the renewed certificate was not the one stored")
	}
}

func TestRenewalWhileRunning(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	s := openStore(t, dir, c)
	before := serial(s)

	got, err := s.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil || got.Leaf.SerialNumber.String() != before {
		t.Fatalf("GetCertificate before the window: %v, %v", got, err)
	}

	c.Advance(DefaultServerValidity - DefaultRenewBefore)
	got, err = s.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Leaf.SerialNumber.String() == before {
		t.Fatal("GetCertificate inside the window served the old certificate")
	}
	onDisk, err := os.ReadFile(s.Paths().Cert)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, certPEM(*got)) {
		t.Error("the renewed certificate was not written to disk")
	}
	renewed, err := s.MaybeRenew()
	if err != nil || renewed {
		t.Errorf("MaybeRenew right after a renewal = %v, %v; want false, nil", renewed, err)
	}
}

func TestRenewalFailureKeepsServing(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	s := openStore(t, dir, c)
	before := serial(s)
	// Without the CA key nothing can be issued.
	s.ca.Key = nil
	c.Advance(DefaultServerValidity - DefaultRenewBefore)
	got, err := s.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil || got.Leaf.SerialNumber.String() != before {
		t.Fatalf("a failed renewal must keep serving the valid certificate: %v", err)
	}
	if _, err := s.MaybeRenew(); err == nil {
		t.Error("MaybeRenew right after a failure did not report it")
	}
	c.Advance(DefaultRenewBefore + time.Second)
	if _, err := s.GetCertificate(&tls.ClientHelloInfo{}); !errors.Is(err, ErrCAKeyMissing) {
		t.Errorf("an expired certificate that cannot be renewed: err = %v, want ErrCAKeyMissing", err)
	}
}

func TestNamesChangeReissues(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	first := openStore(t, dir, c, "localhost", "127.0.0.1")
	same := openStore(t, dir, c, "127.0.0.1", "LOCALHOST")
	if serial(first) != serial(same) {
		t.Error("the same names in another order reissued the certificate")
	}
	other := openStore(t, dir, c, "localhost", "127.0.0.1", "edge-7.example", "10.0.0.7")
	if serial(first) == serial(other) {
		t.Fatal("new names did not reissue the certificate")
	}
	if got := certNames(other.Certificate().Leaf); !slices.Contains(got, "edge-7.example") || !slices.Contains(got, "10.0.0.7") {
		t.Errorf("names %v", got)
	}
}

func TestCrashLeftovers(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	first := openStore(t, dir, c)

	// A crash between the key and the certificate of a renewal: the new key
	// is on disk, the certificate is the old one.
	other, err := first.CA().Issue([]string{"localhost"}, c.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := encodeKey(other.PrivateKey.(crypto.Signer))
	if err := os.WriteFile(first.Paths().CertKey, keyPEM, keyFileMode); err != nil {
		t.Fatal(err)
	}
	// And a temporary file of an interrupted write.
	if err := os.WriteFile(filepath.Join(dir, CertFile+tempMarker+"123"), []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	second := openStore(t, dir, c)
	if serial(second) == serial(first) {
		t.Error("a mismatched key and certificate were not reissued")
	}
	if _, err := tls.LoadX509KeyPair(second.Paths().Cert, second.Paths().CertKey); err != nil {
		t.Errorf("the repaired pair does not load: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), tempMarker) {
			t.Errorf("leftover %s", e.Name())
		}
	}

	// A crash between the CA key and the CA certificate of a first start.
	fresh := t.TempDir()
	if err := os.WriteFile(filepath.Join(fresh, CAKeyFile), keyPEM, keyFileMode); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, fresh, c)
	if !s.Created() || s.CA().Key == nil {
		t.Error("a CA key without a CA certificate did not start a new CA")
	}
}

func TestCAKeyMissing(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	first := openStore(t, dir, c)
	if err := os.Remove(first.Paths().CAKey); err != nil {
		t.Fatal(err)
	}
	// A valid server certificate is still served.
	second := openStore(t, dir, c)
	if serial(second) != serial(first) {
		t.Error("certificate changed without a CA key")
	}
	// One that needs renewal cannot be.
	c.Advance(DefaultServerValidity)
	if _, err := Open(Options{Dir: dir, Now: c.Now}); !errors.Is(err, ErrCAKeyMissing) {
		t.Errorf("err = %v, want ErrCAKeyMissing", err)
	}
}

func TestServerValidityCappedByCA(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	s, err := Open(Options{Dir: dir, Now: c.Now, CAValidity: 100 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(80 * 24 * time.Hour)
	renewed, err := s.MaybeRenew()
	if err != nil || !renewed {
		t.Fatalf("MaybeRenew = %v, %v", renewed, err)
	}
	if !s.Certificate().Leaf.NotAfter.Equal(s.CA().Cert.NotAfter) {
		t.Errorf("server certificate outlives its CA: %v > %v", s.Certificate().Leaf.NotAfter, s.CA().Cert.NotAfter)
	}
	// Capped by the CA, it stays in the window; it must not be reissued on
	// every handshake.
	if renewed, err := s.MaybeRenew(); renewed || err != nil {
		t.Errorf("second MaybeRenew = %v, %v", renewed, err)
	}
	c.Advance(30 * 24 * time.Hour)
	if _, err := Open(Options{Dir: dir, Now: c.Now}); !errors.Is(err, ErrCAExpired) {
		t.Errorf("Open with an expired CA: err = %v, want ErrCAExpired", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	if _, err := Open(Options{}); err == nil {
		t.Error("Open without a directory succeeded")
	}
	if _, err := Open(Options{Dir: t.TempDir(), ServerValidity: time.Hour, RenewBefore: 2 * time.Hour}); err == nil {
		t.Error("a renewal window longer than the validity was accepted")
	}
}
