// Package datadir names the files of a node's data directory that more
// than the node reads: the TLS directory and the CA certificate in it,
// which a client on the same machine trusts, the admin token the CLI
// finds beside the node, and the listen file where a running node
// records its addresses. The node writes them (the certificate store in
// transport/quic/certs writes the CA, ledge serve the listen file); the
// SDK and the CLI look for them by these names, without linking the
// store that issues certificates.
package datadir
