package quic

import (
	"bufio"
	"context"
	"io"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/ledgemq/ledge/transport/quic/certs"
)

func runExp(t *testing.T, scfg, ccfg *quicgo.Config, bufSize int) {
	eph, _ := certs.NewEphemeral("127.0.0.1")
	srvTLS := ServerTLSConfig(nil)
	srvTLS.Certificates = append(srvTLS.Certificates, eph.Server)
	ln, err := quicgo.ListenAddr("127.0.0.1:0", srvTLS, scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	res := make(chan int64, 1)
	var end time.Time
	go func() {
		qc, _ := ln.Accept(context.Background())
		qs, _ := qc.AcceptStream(context.Background())
		n, _ := io.CopyBuffer(io.Discard, qs, make([]byte, 64<<10))
		end = time.Now()
		res <- n
	}()
	qc, err := quicgo.DialAddr(context.Background(), ln.Addr().String(), ClientTLSConfig(eph.CA.Pool(), ""), ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer qc.CloseWithError(0, "")
	qs, _ := qc.OpenStreamSync(context.Background())
	bw := bufio.NewWriterSize(qs, bufSize)
	msg := make([]byte, 1024)
	start := time.Now()
	for i := 1; ; i++ {
		bw.Write(msg)
		if i&63 == 0 && time.Since(start) > 3*time.Second {
			break
		}
	}
	bw.Flush()
	qs.Close()
	n := <-res
	t.Logf("%.1f MB/s", float64(n)/end.Sub(start).Seconds()/1e6)
}

func TestExpDefaults(t *testing.T) { runExp(t, nil, nil, 64<<10) }
func TestExpOurs(t *testing.T) {
	s, _ := Config{}.withDefaults()
	c, _ := ClientConfig{}.withDefaults()
	runExp(t, s.quicConfig(nil), c.quicConfig(), 64<<10)
}
func TestExpBig(t *testing.T) {
	s, _ := Config{InitialStreamReceiveWindow: 8 << 20, InitialConnectionReceiveWindow: 16 << 20}.withDefaults()
	c, _ := ClientConfig{}.withDefaults()
	runExp(t, s.quicConfig(nil), c.quicConfig(), 64<<10)
}
func TestExpBuf16(t *testing.T) {
	s, _ := Config{}.withDefaults()
	c, _ := ClientConfig{}.withDefaults()
	runExp(t, s.quicConfig(nil), c.quicConfig(), 16<<10)
}
func TestExpBuf256(t *testing.T) {
	s, _ := Config{}.withDefaults()
	c, _ := ClientConfig{}.withDefaults()
	runExp(t, s.quicConfig(nil), c.quicConfig(), 256<<10)
}
