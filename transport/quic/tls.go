package quic

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/ledgemq/ledge/transport/wire"
)

// ALPN is the application protocol negotiated in the TLS handshake. A
// client offering anything else is refused during the handshake.
const ALPN = wire.ALPN

// ServerTLSConfig returns a TLS 1.3 server configuration for ALPN that
// takes its certificate from getCert — typically the GetCertificate of package certs' Store,
// which renews the certificate while the node runs.
func ServerTLSConfig(getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		NextProtos:     []string{ALPN},
		GetCertificate: getCert,
	}
}

// ClientTLSConfig returns a TLS 1.3 client configuration for ALPN that
// trusts only roots. serverName is the name to verify; empty means the host
// of the address dialed.
func ClientTLSConfig(roots *x509.CertPool, serverName string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{ALPN},
		RootCAs:    roots,
		ServerName: serverName,
	}
}

// ClientTLSConfigFromCAFile is ClientTLSConfig trusting the CA certificates
// in the PEM file caFile (a node's ca.pem).
func ClientTLSConfigFromCAFile(caFile, serverName string) (*tls.Config, error) {
	pool, err := LoadCAPool(caFile)
	if err != nil {
		return nil, err
	}
	return ClientTLSConfig(pool, serverName), nil
}

// LoadCAPool reads a PEM file of one or more CA certificates (a node's
// ca.pem) into a pool, for a client to trust.
func LoadCAPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("quic: read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("quic: %s holds no PEM certificate", path)
	}
	return pool, nil
}

// enforceTLS returns a copy of c restricted to TLS 1.3 and ALPN.
func enforceTLS(c *tls.Config) *tls.Config {
	c = c.Clone()
	c.MinVersion = tls.VersionTLS13
	c.MaxVersion = 0
	c.NextProtos = []string{ALPN}
	return c
}
