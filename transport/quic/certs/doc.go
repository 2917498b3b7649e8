// Package certs creates, stores and renews the TLS material of a Ledge node:
// a long-lived certificate authority and a short-lived server certificate
// signed by it.
//
// On first start a [Store] finds an empty directory and creates
//
//	ca.pem          the CA certificate (clients trust this file)
//	ca-key.pem      the CA's private key (0600)
//	server.pem      the server certificate (ECDSA P-256, ~90 days)
//	server-key.pem  the server's private key (0600)
//
// Every file is written crash-safely: temporary file, fsync, rename, fsync
// of the directory. A crash between two files leaves a state the next start
// repairs (a CA key without a CA certificate is replaced; a server key that
// does not match its certificate, or a certificate not signed by the CA, is
// reissued).
//
// On each start the store loads the files and reissues the server
// certificate when it is within the renewal window of expiry, when it names
// other hosts than the configuration asks for, or when it is unusable. While
// the node runs, [Store.GetCertificate] (a [crypto/tls.Config]
// GetCertificate callback) renews the certificate the same way, so a
// long-running node never serves an expired one. The CA is never rotated
// automatically: clients pin it, so replacing it is an operator's decision.
//
// The package is not on the storage path of the log: it uses the standard
// library's file APIs directly. Time is injected through [Options.Now].
package certs
