package certs

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of [Options].
const (
	DefaultCAValidity     = 10 * 365 * 24 * time.Hour
	DefaultServerValidity = 90 * 24 * time.Hour
	DefaultRenewBefore    = 30 * 24 * time.Hour
	// renewRetry is how long the store waits after a failed renewal before
	// trying again on a handshake, so a full disk does not make every
	// handshake pay for a key generation.
	renewRetry = time.Minute
)

// Errors of the package. None of them is cured by retrying the same call.
var (
	// ErrCAKeyMissing: the CA certificate exists but its private key does
	// not, and a server certificate must be issued. Restore ca-key.pem, or
	// delete ca.pem to start over with a new CA (clients must then trust the
	// new ca.pem).
	ErrCAKeyMissing = errors.New("certs: the CA private key is missing; restore ca-key.pem or remove ca.pem to create a new CA")
	// ErrCAExpired: the CA certificate has expired; a server certificate
	// signed by it would not be trusted. Remove ca.pem and ca-key.pem to
	// create a new CA, and hand the new ca.pem to clients.
	ErrCAExpired = errors.New("certs: the CA certificate has expired; remove ca.pem and ca-key.pem to create a new CA")
)

// Options configure a [Store]. The zero value of every field but Dir picks
// the documented default.
type Options struct {
	// Dir is the directory holding the four PEM files. It is created (0700)
	// when missing. Required.
	Dir string
	// Names are the DNS names and IP addresses the server certificate is
	// valid for. Default: [DefaultNames] (localhost, 127.0.0.1, ::1 and the
	// host name). A certificate naming a different set is reissued.
	Names []string
	// CAValidity is the lifetime of a new CA. Default 10 years.
	CAValidity time.Duration
	// ServerValidity is the lifetime of a new server certificate. Default
	// 90 days; never past the CA's expiry.
	ServerValidity time.Duration
	// RenewBefore: a server certificate expiring within this window is
	// reissued, at start and on the next handshake while running. Default
	// 30 days. Must be shorter than ServerValidity.
	RenewBefore time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives one line per creation or renewal. Default: discard.
	Logger *slog.Logger
}

func (o *Options) setDefaults() error {
	if o.Dir == "" {
		return errors.New("certs: Options.Dir is required")
	}
	if len(o.Names) == 0 {
		o.Names = DefaultNames()
	}
	if o.CAValidity <= 0 {
		o.CAValidity = DefaultCAValidity
	}
	if o.ServerValidity <= 0 {
		o.ServerValidity = DefaultServerValidity
	}
	if o.RenewBefore <= 0 {
		o.RenewBefore = DefaultRenewBefore
	}
	if o.RenewBefore >= o.ServerValidity {
		return fmt.Errorf("certs: RenewBefore (%v) must be shorter than ServerValidity (%v)", o.RenewBefore, o.ServerValidity)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Paths are the files of a store.
type Paths struct {
	CA, CAKey, Cert, CertKey string
}

// Store holds a node's CA and its current server certificate, and renews the
// latter. It is safe for concurrent use.
type Store struct {
	opts    Options
	paths   Paths
	ca      *CA
	created bool

	cert atomic.Pointer[tls.Certificate]

	mu          sync.Mutex // serializes renewals
	lastFailure time.Time  // of a renewal; zero when the last one succeeded
}

// Open loads the TLS material from opts.Dir, creating what is missing, and
// renews the server certificate if it needs it.
func Open(opts Options) (*Store, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	dir := opts.Dir
	if err := os.MkdirAll(dir, storeDirMode); err != nil {
		return nil, fmt.Errorf("certs: create %s: %w", dir, err)
	}
	removeTempFiles(dir)
	s := &Store{opts: opts, paths: Paths{
		CA:      filepath.Join(dir, CAFile),
		CAKey:   filepath.Join(dir, CAKeyFile),
		Cert:    filepath.Join(dir, CertFile),
		CertKey: filepath.Join(dir, CertKeyFile),
	}}
	if err := s.loadOrCreateCA(); err != nil {
		return nil, err
	}
	if ca := s.ca.Cert; !opts.Now().Before(ca.NotAfter.Add(-opts.RenewBefore)) {
		s.opts.Logger.Warn("the CA certificate expires soon; server certificates cannot outlive it",
			"file", s.paths.CA, "expires", ca.NotAfter)
	}
	cert, reason := s.loadServerCert()
	if reason != "" {
		if err := s.issue(reason); err != nil {
			return nil, err
		}
		return s, nil
	}
	s.cert.Store(cert)
	return s, nil
}

// loadOrCreateCA loads the CA, or creates one when ca.pem does not exist.
// ca.pem is written last, so its existence marks a complete CA.
func (s *Store) loadOrCreateCA() error {
	certBytes, err := readPEMFile(s.paths.CA)
	if errors.Is(err, fs.ErrNotExist) {
		ca, err := NewCA(s.opts.Now(), s.opts.CAValidity)
		if err != nil {
			return err
		}
		keyPEM, err := encodeKey(ca.Key)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(s.opts.Dir, CAKeyFile, keyPEM, keyFileMode); err != nil {
			return err
		}
		if err := writeFileAtomic(s.opts.Dir, CAFile, ca.CertPEM(), certFileMode); err != nil {
			return err
		}
		s.ca, s.created = ca, true
		s.opts.Logger.Info("created a certificate authority", "file", s.paths.CA, "expires", ca.Cert.NotAfter)
		return nil
	}
	if err != nil {
		return fmt.Errorf("certs: read %s: %w", s.paths.CA, err)
	}
	caCert, err := decodeCert(certBytes)
	if err != nil {
		return fmt.Errorf("certs: %s: %w", s.paths.CA, err)
	}
	if !caCert.IsCA {
		return fmt.Errorf("certs: %s is not a CA certificate", s.paths.CA)
	}
	s.ca = &CA{Cert: caCert}
	keyBytes, err := readPEMFile(s.paths.CAKey)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// The CA can still vouch for an existing server certificate.
		s.opts.Logger.Warn("the CA private key is missing; the server certificate cannot be renewed", "file", s.paths.CAKey)
		return nil
	case err != nil:
		return fmt.Errorf("certs: read %s: %w", s.paths.CAKey, err)
	}
	key, err := decodeKey(keyBytes)
	if err != nil {
		return fmt.Errorf("certs: %s: %w", s.paths.CAKey, err)
	}
	if !publicKeysEqual(caCert.PublicKey, key.Public()) {
		return fmt.Errorf("certs: %s does not match %s", s.paths.CAKey, s.paths.CA)
	}
	s.ca.Key = key
	return nil
}

// loadServerCert returns the stored server certificate, or the reason it
// must be (re)issued.
func (s *Store) loadServerCert() (*tls.Certificate, string) {
	certBytes, err := readPEMFile(s.paths.Cert)
	if err != nil {
		return nil, "no server certificate"
	}
	keyBytes, err := readPEMFile(s.paths.CertKey)
	if err != nil {
		return nil, "no server key"
	}
	cert, err := tls.X509KeyPair(certBytes, keyBytes)
	if err != nil {
		return nil, "server key and certificate do not match"
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, "unreadable server certificate"
		}
	}
	if err := cert.Leaf.CheckSignatureFrom(s.ca.Cert); err != nil {
		return nil, "server certificate not signed by the CA"
	}
	if !slices.Equal(certNames(cert.Leaf), canonicalNames(s.opts.Names)) {
		return nil, "configured names changed"
	}
	if reason := s.renewalReason(cert.Leaf, s.opts.Now()); reason != "" {
		return nil, reason
	}
	return &cert, ""
}

// renewalReason says why leaf must be replaced at now, or "" if it need not.
func (s *Store) renewalReason(leaf *x509.Certificate, now time.Time) string {
	if now.After(leaf.NotAfter) {
		return "server certificate expired"
	}
	if !now.Before(leaf.NotAfter.Add(-s.opts.RenewBefore)) {
		// A certificate capped by a CA that expires soon can never leave
		// the window; reissuing it would change nothing.
		if leaf.NotAfter.Equal(s.ca.Cert.NotAfter) && !now.After(s.ca.Cert.NotAfter) {
			return ""
		}
		return "server certificate expires within the renewal window"
	}
	return ""
}

// issue creates, stores and installs a new server certificate.
func (s *Store) issue(reason string) error {
	now := s.opts.Now()
	if s.ca.Key == nil {
		return fmt.Errorf("%w (%s)", ErrCAKeyMissing, reason)
	}
	if !now.Before(s.ca.Cert.NotAfter) {
		return ErrCAExpired
	}
	cert, err := s.ca.Issue(s.opts.Names, now, s.opts.ServerValidity)
	if err != nil {
		return err
	}
	keyPEM, err := encodeKey(cert.PrivateKey.(crypto.Signer))
	if err != nil {
		return err
	}
	// The key goes first: a crash between the two writes leaves a pair that
	// does not match, which the next start reissues.
	if err := writeFileAtomic(s.opts.Dir, CertKeyFile, keyPEM, keyFileMode); err != nil {
		return err
	}
	if err := writeFileAtomic(s.opts.Dir, CertFile, certPEM(cert), certFileMode); err != nil {
		return err
	}
	s.cert.Store(&cert)
	s.opts.Logger.Info("issued a server certificate", "reason", reason, "file", s.paths.Cert,
		"names", s.opts.Names, "expires", cert.Leaf.NotAfter)
	return nil
}

// Created reports whether Open created a new CA (a first start).
func (s *Store) Created() bool { return s.created }

// Paths returns the files of the store.
func (s *Store) Paths() Paths { return s.paths }

// CA returns the store's certificate authority.
func (s *Store) CA() *CA { return s.ca }

// Certificate returns the server certificate currently served.
func (s *Store) Certificate() *tls.Certificate { return s.cert.Load() }

// GetCertificate returns the current server certificate, renewing it first
// when it is within the renewal window. It fits
// [crypto/tls.Config.GetCertificate]. A renewal that fails keeps serving the
// old certificate while it is valid and is retried a minute later.
func (s *Store) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert := s.cert.Load()
	now := s.opts.Now()
	if s.renewalReason(cert.Leaf, now) == "" {
		return cert, nil
	}
	if _, err := s.MaybeRenew(); err != nil && now.After(cert.Leaf.NotAfter) {
		return nil, err
	}
	return s.cert.Load(), nil
}

// MaybeRenew reissues the server certificate if it is within the renewal
// window, and reports whether it did. After a failure it does not try again
// for a minute (by the store's clock) and returns the error meanwhile.
func (s *Store) MaybeRenew() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	reason := s.renewalReason(s.cert.Load().Leaf, now)
	if reason == "" {
		return false, nil
	}
	if !s.lastFailure.IsZero() && now.Sub(s.lastFailure) < renewRetry {
		return false, fmt.Errorf("certs: renewal failed %v ago; waiting before retrying", now.Sub(s.lastFailure))
	}
	if err := s.issue(reason); err != nil {
		s.lastFailure = now
		s.opts.Logger.Error("server certificate renewal failed", "err", err)
		return false, err
	}
	s.lastFailure = time.Time{}
	return true, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}
