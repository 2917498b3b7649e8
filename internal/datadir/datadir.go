package datadir

const (
	// TLSDir is the subdirectory holding the CA and the server certificate.
	TLSDir = "tls"
	// CAFile is the CA certificate (PEM) inside TLSDir.
	CAFile = "ca.pem"
	// AdminTokenFile holds the admin token minted at the first start.
	AdminTokenFile = "admin.token"
)
