package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"slices"
	"strings"
	"time"
)

// backdate is how far before "now" a new certificate becomes valid, so that
// a client whose clock is a little behind the node's still accepts it.
const backdate = time.Hour

// CA is a certificate authority held in memory: its certificate and, when
// available, its private key.
type CA struct {
	Cert *x509.Certificate
	// Key is nil when only the certificate is known; such a CA cannot issue.
	Key crypto.Signer
}

// NewCA creates a certificate authority with a fresh ECDSA P-256 key, valid
// from now (minus an hour of tolerance for clock skew) for validity.
func NewCA(now time.Time, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Ledge CA " + hex.EncodeToString(serial.Bytes()[:4]), Organization: []string{"Ledge"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certs: create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: parse new CA certificate: %w", err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Issue creates a server certificate for names (DNS names and IP
// addresses), with a fresh ECDSA P-256 key, valid from now for validity but
// never past the CA's own expiry.
func (ca *CA) Issue(names []string, now time.Time, validity time.Duration) (tls.Certificate, error) {
	if ca.Key == nil {
		return tls.Certificate{}, ErrCAKeyMissing
	}
	if len(names) == 0 {
		return tls.Certificate{}, errors.New("certs: a server certificate needs at least one name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: generate server key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return tls.Certificate{}, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	dns, ips := splitNames(names)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: dnsOrIP(names[0]), Organization: []string{"Ledge"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              dns,
		IPAddresses:           ips,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: create server certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: parse new server certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// CertPEM returns the CA certificate in PEM form.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Pool returns a certificate pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// Ephemeral is TLS material held only in memory: a CA and a server
// certificate signed by it. Tests and benchmarks use it.
type Ephemeral struct {
	CA     *CA
	Server tls.Certificate
}

// NewEphemeral creates an in-memory CA and a server certificate for names
// (DefaultNames when empty), valid for a day.
func NewEphemeral(names ...string) (*Ephemeral, error) {
	if len(names) == 0 {
		names = DefaultNames()
	}
	now := time.Now()
	ca, err := NewCA(now, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	srv, err := ca.Issue(names, now, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	return &Ephemeral{CA: ca, Server: srv}, nil
}

// DefaultNames returns the names a server certificate carries when none are
// configured: localhost, 127.0.0.1, ::1 and this machine's host name.
func DefaultNames() []string {
	names := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		names = append(names, h)
	}
	return names
}

func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: serial number: %w", err)
	}
	// A leading zero byte would shorten the name derived from it.
	return n.SetBit(n, 126, 1), nil
}

func keyID(pub *ecdsa.PublicKey) []byte {
	b, err := pub.Bytes()
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(b)
	return sum[:20]
}

// splitNames separates IP addresses from DNS names.
func splitNames(names []string) (dns []string, ips []net.IP) {
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, strings.ToLower(n))
		}
	}
	return dns, ips
}

func dnsOrIP(n string) string {
	if len(n) > 64 {
		return n[:64]
	}
	return n
}

// canonicalNames returns names in a form that compares equal for the same
// set: lower-case DNS names and normalized IP addresses, sorted, deduplicated.
func canonicalNames(names []string) []string {
	dns, ips := splitNames(names)
	out := make([]string, 0, len(names))
	out = append(out, dns...)
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// certNames returns the names a certificate is valid for, canonicalized.
func certNames(c *x509.Certificate) []string {
	names := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	return canonicalNames(names)
}
