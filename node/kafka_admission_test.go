package node

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestKafkaSharesQUICAdmission: the Kafka and QUIC listeners' connections
// count against one cap of unauthenticated connections and one of
// authenticated ones. Two Kafka connections waiting to authenticate fill
// a cap of two, and a QUIC client arriving evicts the older; once the QUIC
// client holds the one authenticated place, a new Kafka connection is
// closed at once.
func TestKafkaSharesQUICAdmission(t *testing.T) {
	tn := startNode(t, nil, func(c *Config) {
		c.KafkaListen = "127.0.0.1:0"
		c.Transport.MaxConns, c.Transport.MaxUnauthenticated = 1, 2
	})
	dialKafka := func() net.Conn {
		c, err := net.Dial("tcp", tn.KafkaAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// closedByNode reads until the node closes c. The deadline keeps a
	// broken test from hanging, and is shorter than the listener's
	// authentication timeout (10 s), so that the close it sees is not
	// that one.
	closedByNode := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		return errors.Is(err, io.EOF) || (err != nil && !(errors.As(err, &ne) && ne.Timeout()))
	}
	// apiVersions asks c for the versions the listener speaks, which it
	// answers before authentication: once answered, c holds its place.
	apiVersions := func(c net.Conn) error {
		req := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(req); err != nil {
			return err
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return err
		}
		_, err := io.ReadFull(c, make([]byte, binary.BigEndian.Uint32(size[:])))
		return err
	}
	older, newer := dialKafka(), dialKafka()
	for _, c := range []net.Conn{older, newer} {
		if err := apiVersions(c); err != nil {
			t.Fatalf("ApiVersions before authentication: %v", err)
		}
	}
	tn.mustDial(t, tn.admin)
	if !closedByNode(older) {
		t.Fatal("a QUIC client arriving did not evict the older Kafka connection waiting to authenticate")
	}
	if err := apiVersions(newer); err != nil {
		t.Fatalf("the newer Kafka connection was closed too: %v", err)
	}
	if !closedByNode(dialKafka()) {
		t.Fatal("a Kafka connection was accepted while QUIC connections filled the cap of authenticated ones")
	}
}
