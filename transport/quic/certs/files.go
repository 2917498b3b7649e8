package certs

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ledgemq/ledge/internal/datadir"
)

// File names inside the store's directory. The CA's name is the data
// directory's (package datadir), where clients look for it.
const (
	CAFile        = datadir.CAFile
	CAKeyFile     = "ca-key.pem"
	CertFile      = "server.pem"
	CertKeyFile   = "server-key.pem"
	tempMarker    = ".tmp-"
	keyFileMode   = 0o600
	certFileMode  = 0o644
	storeDirMode  = 0o700
	maxPEMFileLen = 1 << 20
)

// writeFileAtomic replaces dir/name with data so that a crash leaves either
// the old or the new content, never a mix: write a temporary file, fsync
// it, rename it over the target, fsync the directory.
func writeFileAtomic(dir, name string, data []byte, perm os.FileMode) (err error) {
	f, err := os.CreateTemp(dir, name+tempMarker+"*")
	if err != nil {
		return fmt.Errorf("certs: create temporary file for %s: %w", name, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		_ = f.Close()
		return fmt.Errorf("certs: chmod %s: %w", name, err)
	}
	if _, err = f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("certs: write %s: %w", name, err)
	}
	if err = f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("certs: fsync %s: %w", name, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("certs: close %s: %w", name, err)
	}
	if err = os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("certs: rename %s: %w", name, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("certs: open directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("certs: fsync directory %s: %w", dir, err)
	}
	return nil
}

// removeTempFiles deletes temporary files a crash left behind.
func removeTempFiles(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), tempMarker) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// readPEMFile reads a small PEM file; a missing file is reported with
// os.ErrNotExist.
func readPEMFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxPEMFileLen {
		return nil, fmt.Errorf("certs: %s is %d bytes, larger than a PEM file should be", path, fi.Size())
	}
	return os.ReadFile(path)
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func decodeKey(b []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil, errors.New("certs: no private key in PEM data")
		}
		if !strings.HasSuffix(block.Type, "PRIVATE KEY") {
			continue
		}
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			if k, err2 := x509.ParseECPrivateKey(block.Bytes); err2 == nil {
				return k, nil
			}
			return nil, fmt.Errorf("certs: parse private key: %w", err)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("certs: private key of type %T cannot sign", key)
		}
		return signer, nil
	}
}

func decodeCert(b []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil, errors.New("certs: no certificate in PEM data")
		}
		if block.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("certs: parse certificate: %w", err)
			}
			return c, nil
		}
	}
}

func certPEM(c tls.Certificate) []byte {
	var out []byte
	for _, der := range c.Certificate {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out
}
