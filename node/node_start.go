package node

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// SecretFile holds the node's secret (32 random bytes, 0600), created on
// first start. The QUIC stateless reset key is derived from it, so that a
// restarted node resets its clients' old connections at once: they learn
// the node restarted from its first packet instead of after a timeout.
const SecretFile = "node.secret"

// lockFile is the storage engine's lock in the data directory.
const lockFile = "LOCK"

// ErrDataDirInUse is returned by Open when another process holds the data
// directory.
var ErrDataDirInUse = errors.New("data directory in use")

// dataDirError turns a failure to open the storage into one that names
// its cause: the directory held by another process (with its pid when the
// lock tells it), or a read-only directory.
func dataDirError(cfg Config, err error) error {
	pid, held := lockHolder(filepath.Join(cfg.DataDir, lockFile))
	if !held && strings.Contains(err.Error(), "lock held by current process") {
		pid, held = os.Getpid(), true
	}
	if held {
		if pid > 0 {
			return fmt.Errorf("node: %w: %s is held by pid %d (another ledge serve?)", ErrDataDirInUse, cfg.DataDir, pid)
		}
		return fmt.Errorf("node: %w: %s is held by another process (another ledge serve?)", ErrDataDirInUse, cfg.DataDir)
	}
	if errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("node: data directory %s is not writable: %w", cfg.DataDir, err)
	}
	return err
}

// loadResetKey returns the QUIC stateless reset key of the node whose
// data directory is dir, creating the secret it is derived from on first
// start. The key is an HMAC of a fixed label under the secret, so the
// secret itself never leaves the file.
func loadResetKey(dir string) (*[32]byte, error) {
	secret, err := loadOrCreateSecret(filepath.Join(dir, SecretFile))
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("ledge quic stateless reset key v1"))
	var key [32]byte
	copy(key[:], mac.Sum(nil))
	return &key, nil
}

func loadOrCreateSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil && len(b) == 32:
		return b, nil
	case err == nil:
		return nil, fmt.Errorf("node: %s holds %d bytes, not 32: remove it to make a new one (clients of the node then wait out their old connections once)", path, len(b))
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("node: reading the node secret: %w", err)
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	// write, sync, rename, sync the directory: a crash leaves the old
	// state (no secret) or the whole new one.
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("node: creating the node secret: %w", err)
	}
	_, err = f.Write(secret)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("node: creating the node secret: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return secret, nil
}

// logRecovered logs the recovery result of every partition, one line
// each: the offsets and history epoch it is served with (info), or why it
// is not served (error). Open calls it once the storage is open.
func (n *Node) logRecovered() {
	for _, t := range n.topicList() {
		for i, l := range t.Logs {
			st := l.State()
			if st.Failed != nil {
				n.log.Error("partition not served: its log failed recovery", "topic", t.Name, "partition", i, "err", st.Failed)
				continue
			}
			n.log.Info("partition recovered", "topic", t.Name, "partition", i,
				"log_start", st.LogStart, "high_watermark", st.HighWatermark, "history_epoch", uint64(st.History))
		}
	}
}
