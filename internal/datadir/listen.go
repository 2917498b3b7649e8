package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ListenFile names, in a running node's data directory, where the node
// listens: a client on the same machine that knows the data directory
// (./ledge-data, --data-dir, LEDGE_DATA_DIR) finds the node's ports there
// without being told them. The node writes it once it serves and removes
// it when it stops; a node killed before it could leaves a stale one,
// which Live recognises.
const ListenFile = "listen.json"

// LockFile is the storage's lock in the data directory: held, by the
// node's process, for as long as a node has the directory open.
const LockFile = "LOCK"

// maxListenFileLen bounds what ReadListen reads: the file is a few
// hundred bytes.
const maxListenFileLen = 64 << 10

// Listen is the content of ListenFile. Addresses are host:port, empty
// for a listener the node does not run.
type Listen struct {
	// PID is the node's process.
	PID int `json:"pid"`
	// QUIC is the address of the QUIC listener (clients, the SDK, the CLI).
	QUIC string `json:"quic"`
	// HTTP is the address of the HTTP listener (metrics, status, health).
	HTTP string `json:"http,omitempty"`
	// Kafka is the address of the Kafka protocol listener.
	Kafka string `json:"kafka,omitempty"`
	// Version is the node's software version.
	Version string `json:"version,omitempty"`
	// Started is when the node started serving.
	Started time.Time `json:"started"`
}

// WriteListen records l in dir's ListenFile, atomically: a reader sees
// the old file or the new one, never a part of it. It is not synced: a
// crash makes the file stale anyway.
func WriteListen(dir string, l Listen) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	path := filepath.Join(dir, ListenFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// RemoveListen removes dir's ListenFile; a missing one is not an error.
func RemoveListen(dir string) error {
	err := os.Remove(filepath.Join(dir, ListenFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// ReadListen returns what dir's ListenFile records and whether a node
// still runs on dir (see Live). A missing file is fs.ErrNotExist.
func ReadListen(dir string) (l Listen, live bool, err error) {
	path := filepath.Join(dir, ListenFile)
	f, err := os.Open(path)
	if err != nil {
		return l, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxListenFileLen+1))
	switch {
	case err != nil:
		return l, false, fmt.Errorf("reading %s: %w", path, err)
	case len(b) > maxListenFileLen:
		return l, false, fmt.Errorf("%s is larger than a listen file", path)
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, false, fmt.Errorf("%s is not a listen file: %w", path, err)
	}
	return l, Live(dir, l.PID), nil
}

// DialAddr turns a listener's address into one a client on the same
// machine dials: a wildcard host (0.0.0.0, ::, none) becomes the
// loopback address of its family, which the node's certificate names.
func DialAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	switch ip := net.ParseIP(host); {
	case host == "":
		host = "127.0.0.1"
	case ip == nil || !ip.IsUnspecified():
		return listen
	case ip.To4() != nil:
		host = "127.0.0.1"
	default:
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}
