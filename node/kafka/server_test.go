package kafka

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBackend accepts the token "good" with a session that serves
// nothing (these tests never get past the requests every broker answers
// itself).
type fakeBackend struct{}

type nopSession struct{ Session }

func (nopSession) Valid() error { return nil }

func (fakeBackend) Authenticate(secret, _ string) (Session, error) {
	if secret != "good" {
		return nil, &wire.Error{Status: wire.StatusUnauthenticated, Message: "unknown token"}
	}
	return nopSession{}, nil
}

// rawClient speaks the protocol by hand, one request at a time.
type rawClient struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	corr int32
}

func dialRaw(t *testing.T) *rawClient {
	t.Helper()
	return dialServer(t, listen(t, Config{}))
}

// listen starts a listener of fakeBackend, configured as cfg otherwise.
func listen(t *testing.T, cfg Config) *Server {
	t.Helper()
	cfg.Listen, cfg.Backend = "127.0.0.1:0", fakeBackend{}
	s, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func dialServer(t *testing.T, s *Server) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // a hang fails instead of blocking the run
	return &rawClient{t: t, c: c, r: bufio.NewReader(c)}
}

// send writes req (a non-flexible version) and reads its response into
// resp; it returns io.EOF when the listener closed the connection.
func (rc *rawClient) send(req kmsg.Request, resp kmsg.Response) error {
	rc.t.Helper()
	rc.corr++
	b := []byte{0, 0, 0, 0}
	b = kbin.AppendInt16(b, req.Key())
	b = kbin.AppendInt16(b, req.GetVersion())
	b = kbin.AppendInt32(b, rc.corr)
	b = kbin.AppendNullableString(b, nil)
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := rc.c.Write(b); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(rc.r, size[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(rc.r, body); err != nil {
		return err
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != rc.corr {
		rc.t.Fatalf("response to request %d, want %d", corr, rc.corr)
	}
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(body[4:])
}

func (rc *rawClient) authenticate(password string) int16 {
	rc.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	hsr := kmsg.NewPtrSASLHandshakeResponse()
	if err := rc.send(hs, hsr); err != nil || hsr.ErrorCode != 0 {
		rc.t.Fatalf("handshake: %v %v", err, kerr.ErrorForCode(hsr.ErrorCode))
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("\x00user\x00" + password)
	ar := kmsg.NewPtrSASLAuthenticateResponse()
	if err := rc.send(auth, ar); err != nil {
		rc.t.Fatalf("authenticate: %v", err)
	}
	return ar.ErrorCode
}

// TestUnsupportedRequests: a request of an API the listener serves, at a
// version it does not speak, is answered with UNSUPPORTED_VERSION and the
// connection goes on serving; a request of an API it does not serve
// (DescribeConfigs, or a key Kafka does not define) closes the
// connection, as a Kafka broker does.
func TestUnsupportedRequests(t *testing.T) {
	rc := dialRaw(t)
	if code := rc.authenticate("good"); code != 0 {
		t.Fatalf("authentication refused: %v", kerr.ErrorForCode(code))
	}
	old := kmsg.NewPtrFetchRequest()
	old.Version = 0 // below what the listener speaks
	fr := kmsg.NewPtrFetchResponse()
	if err := rc.send(old, fr); err != nil {
		t.Fatalf("Fetch v0: %v", err)
	}
	av := kmsg.NewPtrApiVersionsResponse()
	if err := rc.send(kmsg.NewPtrApiVersionsRequest(), av); err != nil || av.ErrorCode != 0 || len(av.ApiKeys) == 0 {
		t.Fatalf("ApiVersions after an unsupported version: %v %v", err, kerr.ErrorForCode(av.ErrorCode))
	}
	if err := rc.send(kmsg.NewPtrDescribeConfigsRequest(), kmsg.NewPtrDescribeConfigsResponse()); !closedByNode(err) {
		t.Fatalf("DescribeConfigs: %v, want the connection closed", err)
	}

	rc = dialRaw(t)
	if code := rc.authenticate("good"); code != 0 {
		t.Fatalf("authentication refused: %v", kerr.ErrorForCode(code))
	}
	unknown := []byte{0, 0, 0, 10, 0x03, 0xe7, 0, 0, 0, 0, 0, 9, 0xff, 0xff} // key 999
	if _, err := rc.c.Write(unknown); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.r.ReadByte(); !closedByNode(err) {
		t.Fatalf("an api key of 999: %v, want the connection closed", err)
	}
}

// TestApiVersionsTooNew: an ApiVersions newer than the listener speaks is
// answered at v0 with UNSUPPORTED_VERSION and the versions it does speak
// (KIP-511), so the client retries at one of them.
func TestApiVersionsTooNew(t *testing.T) {
	rc := dialRaw(t)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 2
	_, hi, _ := supported(req.Key())
	rc.corr++
	b := []byte{0, 0, 0, 0}
	b = kbin.AppendInt16(b, req.Key())
	b = kbin.AppendInt16(b, hi+1)
	b = kbin.AppendInt32(b, rc.corr)
	b = kbin.AppendNullableString(b, nil)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := rc.c.Write(b); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(rc.r, size[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(rc.r, body); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse() // v0
	if err := resp.ReadFrom(body[4:]); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions v%d: error %v, %d keys; want UNSUPPORTED_VERSION with the keys served", hi+1, kerr.ErrorForCode(resp.ErrorCode), len(resp.ApiKeys))
	}
}

// closedByNode reports whether err is the node closing the connection: an
// end of stream, or a reset when the node closed it with the client's next
// request still unread (the kernel then answers with RST, not FIN).
func closedByNode(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// TestAuthentication: a wrong token is refused and the connection closed;
// so is a request that skips authentication.
func TestAuthentication(t *testing.T) {
	rc := dialRaw(t)
	if code := rc.authenticate("wrong"); code != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("a wrong token: %v, want SASL_AUTHENTICATION_FAILED", kerr.ErrorForCode(code))
	}
	if err := rc.send(kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse()); !closedByNode(err) {
		t.Fatalf("after a refused authentication the connection answered: %v", err)
	}

	rc = dialRaw(t)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 4
	if err := rc.send(md, kmsg.NewPtrMetadataResponse()); !closedByNode(err) {
		t.Fatalf("a Metadata request before authentication: %v, want the connection closed", err)
	}
}
