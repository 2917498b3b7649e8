package node

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ledgemq/ledge/transport/quic"
)

// PeersFile lists, in the data directory, the QUIC connections of the
// node's clients as they stood a second or so ago: each client's address
// and the connection ID it sends to. A node that stops cleanly closes its
// connections and removes the file. A node that starts and finds it was
// killed: its clients may be parked in long polls, with nothing to send
// that would meet a stateless reset, so it sends each listed connection a
// stateless reset at once (quic.Listener.ResetPeers), and they reconnect
// and poll again without waiting out their polls. A connection opened, or
// moved to a new connection ID, after the last write is not in it: its
// client learns of the restart at its next request, or when its poll runs
// out.
const PeersFile = "peers"

// peersInterval is how often the node writes PeersFile, when its peers
// changed. Writing costs nothing while they stay the same (an idle fleet);
// a file of 10,000 peers is 340 KB.
const peersInterval = time.Second

// peersMagic opens PeersFile; a CRC32C (Castagnoli) of the list follows.
var peersMagic = [4]byte{'L', 'P', 'R', '1'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodePeers is PeersFile's content: the magic, the list's CRC, the list.
func encodePeers(peers []quic.Peer) []byte {
	body := quic.AppendPeers(nil, peers)
	b := make([]byte, 0, 8+len(body))
	b = append(b, peersMagic[:]...)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(body, castagnoli))
	return append(b, body...)
}

func decodePeers(b []byte) ([]quic.Peer, error) {
	if len(b) < 8 || !bytes.Equal(b[:4], peersMagic[:]) {
		return nil, errors.New("not a peer list of this version")
	}
	body := b[8:]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[4:8]) {
		return nil, errors.New("peer list fails its checksum")
	}
	return quic.ParsePeers(body)
}

// peersLoop resets the connections its predecessor listed, if it was
// killed, then keeps the list of this node's own until the node drains.
func (n *Node) peersLoop() {
	path := filepath.Join(n.cfg.DataDir, PeersFile)
	n.resetPredecessorsPeers(path)
	t := time.NewTicker(peersInterval)
	defer t.Stop()
	var last []byte
	for {
		select {
		case <-n.drain.Done():
			return
		case <-t.C:
		}
		peers := n.ln.Peers()
		b := encodePeers(peers)
		if bytes.Equal(b, last) {
			continue
		}
		if err := writePeers(path, b, len(peers) == 0); err != nil {
			n.log.Warn("writing the peer list", "err", err)
			continue
		}
		last = b
	}
}

// resetPredecessorsPeers reads the list a node left when it was killed,
// resets every connection in it and removes it.
func (n *Node) resetPredecessorsPeers(path string) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		var peers []quic.Peer
		if peers, err = decodePeers(b); err == nil {
			var sent int
			sent, err = n.ln.ResetPeers(peers)
			n.log.Info("reset the connections of the node's previous run, which did not stop cleanly", "connections", sent)
		}
	}
	if err != nil {
		n.log.Warn("resetting the connections of the node's previous run", "file", path, "err", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		n.log.Warn("removing the peer list", "err", err)
	}
}

// writePeers replaces PeersFile by renaming a whole new one over it, or
// removes it when no connection is left. It does not sync: the list
// serves a successor after the process was killed, when the kernel still
// holds what it wrote; after a power cut the clients' connections have
// gone too, and a torn list fails its checksum and is ignored.
func writePeers(path string, b []byte, empty bool) error {
	if empty {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}

// forgetPeers removes PeersFile once the node has closed its connections:
// its clients know it stopped.
func (n *Node) forgetPeers() {
	path := filepath.Join(n.cfg.DataDir, PeersFile)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		n.log.Warn("removing the peer list", "err", err)
	}
}
