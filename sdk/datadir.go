package sdk

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/ledgemq/ledge/internal/datadir"
	"github.com/ledgemq/ledge/transport/quic"
)

// AdminTokenFile is the name of the file in a node's data directory that
// holds the admin token the node created on its first start.
const AdminTokenFile = datadir.AdminTokenFile

// maxTokenFileLen bounds a token file: a token is at most a few hundred
// bytes.
const maxTokenFileLen = 64 << 10

// DataDirFiles are what a client uses from a node's data directory; an
// empty path was not found.
type DataDirFiles struct {
	CA         string // the CA certificate (PEM)
	AdminToken string // the admin token
}

// FindDataDirFiles looks for the CA certificate and the admin token in a
// node's data directory: at its top level, or in a "tls" subdirectory for
// the CA. It returns empty paths for files it does not find, and an error
// only when dir itself cannot be read.
func FindDataDirFiles(dir string) (DataDirFiles, error) {
	if _, err := os.Stat(dir); err != nil {
		return DataDirFiles{}, err
	}
	var f DataDirFiles
	for _, p := range []string{
		filepath.Join(dir, datadir.CAFile),
		filepath.Join(dir, datadir.TLSDir, datadir.CAFile),
		filepath.Join(dir, "certs", datadir.CAFile),
	} {
		if isFile(p) {
			f.CA = p
			break
		}
	}
	if p := filepath.Join(dir, AdminTokenFile); isFile(p) {
		f.AdminToken = p
	}
	return f, nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// readTokenFile reads a bearer token, trimming white space.
func readTokenFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("sdk: token file: %w", err)
	}
	if fi.Size() > maxTokenFileLen {
		return "", fmt.Errorf("sdk: token file %s is %d bytes, larger than a token", path, fi.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("sdk: token file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("sdk: token file %s is empty", path)
	}
	return t, nil
}

// credentials resolves the TLS configuration and the token from the
// options: explicit ones first, then the data directory.
func (c *clientConfig) credentials(addr string) (*tls.Config, string, error) {
	var found DataDirFiles
	if c.dataDir != "" {
		f, err := FindDataDirFiles(c.dataDir)
		switch {
		case err == nil:
			found = f
		case c.dataDirSet || !errors.Is(err, fs.ErrNotExist):
			return nil, "", fmt.Errorf("sdk: data directory: %w", err)
		}
	}

	token := c.token
	switch {
	case token != "":
	case c.tokenFile != "":
		t, err := readTokenFile(c.tokenFile)
		if err != nil {
			return nil, "", err
		}
		token = t
	case found.AdminToken != "":
		t, err := readTokenFile(found.AdminToken)
		if err != nil {
			return nil, "", err
		}
		token = t
	default:
		return nil, "", ErrNoCredentials
	}

	serverName := c.serverName
	if serverName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			serverName = host
		}
	}
	switch {
	case c.tlsConfig != nil:
		cfg := c.tlsConfig.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = serverName
		}
		return cfg, token, nil
	case c.caFile != "":
		cfg, err := quic.ClientTLSConfigFromCAFile(c.caFile, serverName)
		return cfg, token, err
	case found.CA != "":
		cfg, err := quic.ClientTLSConfigFromCAFile(found.CA, serverName)
		return cfg, token, err
	}
	return quic.ClientTLSConfig(nil, serverName), token, nil
}

// The environment variables Dial reads to locate a node when its address
// and WithDataDir leave it open: the same ones, with the same meaning, as
// the ledge CLI's. Credentials are not read from the environment: an
// application passes them (WithToken, WithTokenFile, WithCAFile), or
// finds them in the data directory. An empty variable counts as unset.
const (
	// EnvServer is the node's QUIC address (host:port), for an empty
	// address given to Dial.
	EnvServer = "LEDGE_SERVER"
	// EnvDataDir is the node's data directory, where Dial finds its
	// listen file, CA certificate and admin token, unless WithDataDir is
	// given. Unlike WithDataDir's, a missing one is not an error (the
	// variable may be meant for another program): it is the default.
	EnvDataDir = "LEDGE_DATA_DIR"
	// EnvCA, EnvToken and EnvTokenFile are the CLI's: the CA certificate
	// file, the bearer token and a file holding it. Dial does not read
	// them.
	EnvCA        = "LEDGE_CA"
	EnvToken     = "LEDGE_TOKEN"
	EnvTokenFile = "LEDGE_TOKEN_FILE"
)

// fromEnv fills what the options left unset of the node's location from
// the environment.
func (c *clientConfig) fromEnv(getenv func(string) string) {
	if v := getenv(EnvDataDir); v != "" && !c.dataDirSet {
		c.dataDir = v
	}
}

// resolveAddr returns the address Dial dials for addr, where it comes
// from, and that in words: addr itself, else EnvServer, else the listen
// file of a node running on the data directory, else DefaultAddr.
func (c *clientConfig) resolveAddr(addr string, getenv func(string) string) (string, AddrSource, string) {
	if addr != "" {
		return addr, AddrGiven, AddrGiven.String()
	}
	if v := getenv(EnvServer); v != "" {
		return v, AddrEnv, EnvServer
	}
	why := "no " + EnvServer
	if c.dataDir != "" {
		path := filepath.Join(c.dataDir, datadir.ListenFile)
		l, live, err := datadir.ReadListen(c.dataDir)
		switch {
		case err == nil && live && l.QUIC != "":
			return l.QUIC, AddrListenFile, path
		case err == nil:
			why += fmt.Sprintf(", and %s is stale: the node that wrote it (pid %d) is gone", path, l.PID)
		case errors.Is(err, fs.ErrNotExist):
			why += ", no node's listen file in " + c.dataDir
		default:
			why += ", " + err.Error()
		}
	}
	return DefaultAddr, AddrDefault, "the default address: " + why
}

// DialAddr returns the address Dial(ctx, addr, opts...) dials, where it
// comes from, and that in words (the variable, the listen file's path,
// or why the default applies), without dialing.
func DialAddr(addr string, opts ...Option) (string, AddrSource, string) {
	cfg := defaultClientConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	cfg.fromEnv(os.Getenv)
	return cfg.resolveAddr(addr, os.Getenv)
}
