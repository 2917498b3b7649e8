package e2e

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/ledgemq/ledge/internal/testtool"
	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
)

// fuzzTopic is the topic the fuzzed requests may produce to and fetch
// from (the token's scopes); the seeds were captured against it.
const fuzzTopic = "fz"

// FuzzKafkaRequest sends each input, a Kafka request (header and body,
// without its size), to a real node's Kafka listener on a connection
// authenticated with a token that may produce to and consume fuzzTopic,
// and follows it with an ApiVersions request: the input's answer (if
// any) and the ApiVersions answer, or the connection closed, must come
// back. The node runs in this process, so a crash fails the fuzz; the
// heap allocated while the node serves the input must stay within
// 2 × its size + 1 MiB.
//
// The seeds (testdata/fuzz/FuzzKafkaRequest) are requests kcat,
// franz-go and kafkajs sent (TestKafkaCaptureFuzzSeeds records them);
// go test runs them. To fuzz for minutes (minimizing a 1 MiB seed at Go's
// default of 60 s an input stalls the run):
//
//	go test ./internal/e2e -run '^$' -fuzz FuzzKafkaRequest -fuzztime 10m -fuzzminimizetime 5s -parallel 1
func FuzzKafkaRequest(f *testing.F) {
	n := startNode(f, func(c *node.Config) {
		c.KafkaListen = "127.0.0.1:0"
		c.MaxPollWait = 20 * time.Millisecond // a fetch that waits holds the loop
	})
	c := dial(f, n)
	createTopic(f, c, fuzzTopic, sdk.TopicConfig{Partitions: 2})
	_, secret, err := c.CreateToken(testContext(f), sdk.TokenSpec{Label: "fuzz", Topic: fuzzTopic, Scopes: sdk.ScopeProduce | sdk.ScopeConsume})
	if err != nil {
		f.Fatal(err)
	}
	for _, req := range hostileKafkaRequests() {
		f.Add(req)
	}
	var mu sync.Mutex
	var fc *fuzzConn
	f.Fuzz(func(t *testing.T, req []byte) {
		if len(req) > 4<<20 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if fc == nil {
			if fc, err = dialFuzzConn(n.KafkaAddr(), secret); err != nil {
				t.Fatalf("dial: %v", err)
			}
		}
		out := frame(req)
		out = append(out, frame(encodeRequest(kmsg.NewPtrApiVersionsRequest(), syncCorrelation))...)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		alive, err := fc.roundTrip(out)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("a request of %d bytes: %v", len(req), err)
		}
		if !alive {
			fc.c.Close()
			fc = nil
		}
		if grown, bound := after.TotalAlloc-before.TotalAlloc, uint64(2*len(req)+1<<20); grown > bound {
			t.Errorf("a request of %d bytes (api key %d) allocated %d bytes, over %d", len(req), apiKeyOf(req), grown, bound)
		}
	})
}

// hostileKafkaRequests are requests that claim more than they carry:
// record counts, array lengths and tagged fields beyond their bytes,
// and arrays of many small elements that decode.
func hostileKafkaRequests() [][]byte {
	var out [][]byte
	// A 69-byte batch claiming 2,147,483,647 records.
	batch := kmsg.RecordBatch{Magic: 2, NumRecords: 1<<31 - 1, ProducerID: -1, Records: []byte{14, 0, 0, 0, 0, 2, 'v', 0}}
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks, produce.TimeoutMillis = 7, -1, 1000
	produce.Topics = []kmsg.ProduceRequestTopic{{Topic: fuzzTopic, Partitions: []kmsg.ProduceRequestTopicPartition{{Records: raw}}}}
	out = append(out, encodeRequest(produce, 1))
	// Arrays claiming an element a byte, in 1 MiB (Produce, Fetch) and
	// 15 KiB (the others' bound is 16 KiB), and arrays of elements that
	// decode: empty topic names.
	claim := func(key, version int16, prefix []byte, size int) []byte {
		b := kbin.AppendInt16(nil, key)
		b = kbin.AppendInt16(b, version)
		b = kbin.AppendInt32(b, 1)
		b = kbin.AppendNullableString(b, nil)
		b = append(b, prefix...)
		b = kbin.AppendArrayLen(b, size/2)
		return append(b, make([]byte, size-len(b))...)
	}
	out = append(out,
		claim(kmsg.Produce.Int16(), 7, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 3, 0xe8}, 1<<20),
		claim(kmsg.Fetch.Int16(), 11, make([]byte, 4*4+1+4+4), 1<<20),
		claim(kmsg.Metadata.Int16(), 4, nil, 15<<10),
		claim(kmsg.OffsetCommit.Int16(), 7, []byte{0, 1, 'g', 0, 0, 0, 1, 0, 1, 'm', 0xff, 0xff}, 15<<10),
		claim(kmsg.ListOffsets.Int16(), 2, []byte{0xff, 0xff, 0xff, 0xff, 0}, 15<<10),
		claim(kmsg.DescribeGroups.Int16(), 4, nil, 15<<10),
	)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 4
	for range 7000 {
		md.Topics = append(md.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr("")})
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version = 4
	dg.Groups = make([]string, 7000)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group, oc.MemberID, oc.Generation = 7, "g", "m", 1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: fuzzTopic}}
	for range 3000 {
		oc.Topics[0].Partitions = append(oc.Topics[0].Partitions, kmsg.OffsetCommitRequestTopicPartition{Offset: -1, LeaderEpoch: -1})
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 11
	fetch.Topics = []kmsg.FetchRequestTopic{{Topic: fuzzTopic}}
	for range 3000 {
		fetch.Topics[0].Partitions = append(fetch.Topics[0].Partitions, kmsg.FetchRequestTopicPartition{Partition: 1, CurrentLeaderEpoch: -1, LogStartOffset: -1})
	}
	for _, req := range []kmsg.Request{md, dg, oc, fetch} {
		out = append(out, encodeRequest(req, 1))
	}
	return out
}

func apiKeyOf(req []byte) int16 {
	if len(req) < 2 {
		return -1
	}
	return int16(binary.BigEndian.Uint16(req))
}

// fuzzConn is an authenticated connection to the Kafka listener.
type fuzzConn struct {
	c net.Conn
	r *bufio.Reader
}

// syncCorrelation is the correlation id of the ApiVersions request that
// follows each input.
const syncCorrelation = 0x5eed

func dialFuzzConn(addr, secret string) (*fuzzConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	fc := &fuzzConn{c: c, r: bufio.NewReader(c)}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("\x00fuzz\x00" + secret)
	for _, req := range []kmsg.Request{hs, auth} {
		if _, err := c.Write(frame(encodeRequest(req, 1))); err != nil {
			return nil, err
		}
		if _, err := fc.readFrame(); err != nil {
			return nil, err
		}
	}
	return fc, nil
}

// encodeRequest is req with a request header (no client id), at req's
// version.
func encodeRequest(req kmsg.Request, corr int32) []byte {
	b := kbin.AppendInt16(nil, req.Key())
	b = kbin.AppendInt16(b, req.GetVersion())
	b = kbin.AppendInt32(b, corr)
	b = kbin.AppendNullableString(b, nil)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func (fc *fuzzConn) readFrame() ([]byte, error) {
	_ = fc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(fc.r, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(fc.r, body)
	return body, err
}

// roundTrip sends out (a request and an ApiVersions request, framed),
// and reads until the latter's answer (alive) or the connection's end
// (not alive). An error is the node neither answering nor closing in
// time.
func (fc *fuzzConn) roundTrip(out []byte) (alive bool, err error) {
	_ = fc.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := fc.c.Write(out); err != nil {
		return false, nil // closed while the input was being written
	}
	for {
		body, err := fc.readFrame()
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return false, fmt.Errorf("no answer and no close in 10 s")
		case err != nil:
			return false, nil
		case len(body) >= 4 && int32(binary.BigEndian.Uint32(body)) == syncCorrelation:
			return true, nil
		}
	}
}

// TestKafkaCaptureFuzzSeeds records the requests kcat, franz-go and
// kafkajs send to a node (producing to, reading from and consuming in a
// group on fuzzTopic) as FuzzKafkaRequest's seeds, one file per client,
// API and version, SASL requests left out. It runs when
// LEDGE_KAFKA_CAPTURE is set:
//
//	LEDGE_KAFKA_CAPTURE=1 go test ./internal/e2e -run TestKafkaCaptureFuzzSeeds
func TestKafkaCaptureFuzzSeeds(t *testing.T) {
	if os.Getenv("LEDGE_KAFKA_CAPTURE") == "" {
		t.Skip("set LEDGE_KAFKA_CAPTURE=1 to record the seeds again")
	}
	n := startKafkaNode(t)
	c := dial(t, n)
	createTopic(t, c, fuzzTopic, sdk.TopicConfig{Partitions: 2})
	secret := adminToken(t, n)
	dir := filepath.Join("testdata", "fuzz", "FuzzKafkaRequest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	capture := func(client string, run func(addr string)) {
		p := startRecordingProxy(t, n.KafkaAddr())
		run(p.addr())
		written := 0
		for _, req := range p.requests() {
			key, version := apiKeyOf(req), int16(binary.BigEndian.Uint16(req[2:]))
			if key == kmsg.SASLHandshake.Int16() || key == kmsg.SASLAuthenticate.Int16() || kmsg.NameForKey(key) == "" {
				continue
			}
			name := filepath.Join(dir, fmt.Sprintf("%s-%s-v%d", client, kmsg.NameForKey(key), version))
			if _, err := os.Stat(name); err == nil {
				continue
			}
			seed := "go test fuzz v1\n[]byte(" + strconv.Quote(string(req)) + ")\n"
			if err := os.WriteFile(name, []byte(seed), 0o644); err != nil {
				t.Fatal(err)
			}
			written++
		}
		t.Logf("%s: %d requests, %d seeds written", client, len(p.requests()), written)
	}

	capture("franz-go", func(addr string) {
		opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "capture", Pass: secret}.AsMechanism())}
		prod, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		ctx := testContext(t)
		for i := range 4 {
			r := &kgo.Record{Topic: fuzzTopic, Key: fmt.Appendf(nil, "k%d", i), Value: []byte("franz-go"),
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		cons, err := kgo.NewClient(append(opts, kgo.ConsumerGroup("capture-kgo"), kgo.ConsumeTopics(fuzzTopic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		for read := 0; read < 4; {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatal("franz-go did not read what it wrote")
			}
			read += fs.NumRecords()
		}
		if err := cons.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
		cons.LeaveGroup()
	})
	if bin := testtool.Find("kcat"); bin != "" {
		capture("kcat", func(addr string) {
			run := func(stdin string, args ...string) {
				all := append([]string{"-b", addr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
					"-X", "sasl.username=kcat", "-X", "sasl.password=" + secret}, args...)
				cmd := exec.CommandContext(testContext(t), bin, all...)
				cmd.Stdin = strings.NewReader(stdin)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("kcat %v: %v\n%s", args, err, out)
				}
			}
			run("", "-L")
			run("a\nb\nc\n", "-P", "-t", fuzzTopic)
			run("", "-C", "-t", fuzzTopic, "-o", "beginning", "-e")
			run("", "-G", "capture-kcat", "-c", "4", "-X", "auto.offset.reset=earliest", fuzzTopic)
		})
	}
	if nodeBin := testtool.Find("node", "nodejs"); nodeBin != "" {
		jsDir := kafkajsDir(t)
		capture("kafkajs", func(addr string) {
			script, err := filepath.Abs(filepath.Join("testdata", "kafkajs.js"))
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(testContext(t), nodeBin, script, addr, secret, fuzzTopic, "capture-js", "3")
			cmd.Dir = jsDir
			cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(jsDir, "node_modules"), "KAFKAJS_NO_PARTITIONER_WARNING=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("kafkajs: %v\n%s", err, out)
			}
		})
	}
}

// recordingProxy forwards connections to a Kafka listener and records
// every request frame clients send. It answers Metadata and
// FindCoordinator with its own address, so that clients come back
// through it.
type recordingProxy struct {
	ln   net.Listener
	mu   sync.Mutex
	reqs [][]byte
}

// rewriteBroker makes a Metadata or FindCoordinator response (body after
// the size) name the proxy as the broker; key and version are the
// request's.
func (p *recordingProxy) rewriteBroker(body []byte, key, version int16) []byte {
	var resp kmsg.Response
	switch key {
	case kmsg.Metadata.Int16():
		resp = kmsg.NewPtrMetadataResponse()
	case kmsg.FindCoordinator.Int16():
		resp = kmsg.NewPtrFindCoordinatorResponse()
	default:
		return body
	}
	resp.SetVersion(version)
	hdr := 4
	if resp.IsFlexible() {
		hdr++
	}
	if len(body) < hdr || resp.ReadFrom(body[hdr:]) != nil {
		return body
	}
	host, port, _ := net.SplitHostPort(p.addr())
	pn, _ := strconv.Atoi(port)
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = host, int32(pn)
		}
	case *kmsg.FindCoordinatorResponse:
		r.Host, r.Port = host, int32(pn)
		for i := range r.Coordinators {
			r.Coordinators[i].Host, r.Coordinators[i].Port = host, int32(pn)
		}
	}
	return resp.AppendTo(bytes.Clone(body[:hdr]))
}

func startRecordingProxy(t *testing.T, target string) *recordingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{ln: ln}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c, target)
		}
	}()
	return p
}

func (p *recordingProxy) addr() string { return p.ln.Addr().String() }

func (p *recordingProxy) requests() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.reqs...)
}

func (p *recordingProxy) forward(c net.Conn, target string) {
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	var asked sync.Map // correlation id → the request's key and version
	go func() {
		defer c.Close()
		r := bufio.NewReader(s)
		for {
			var size [4]byte
			if _, err := io.ReadFull(r, size[:]); err != nil {
				return
			}
			body := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(r, body); err != nil {
				return
			}
			if len(body) >= 4 {
				if kv, ok := asked.LoadAndDelete(int32(binary.BigEndian.Uint32(body))); ok {
					body = p.rewriteBroker(body, kv.([2]int16)[0], kv.([2]int16)[1])
				}
			}
			if _, err := c.Write(frame(body)); err != nil {
				return
			}
		}
	}()
	r := bufio.NewReader(c)
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		if len(body) >= 8 {
			asked.Store(int32(binary.BigEndian.Uint32(body[4:])), [2]int16{apiKeyOf(body), int16(binary.BigEndian.Uint16(body[2:]))})
			p.mu.Lock()
			p.reqs = append(p.reqs, bytes.Clone(body))
			p.mu.Unlock()
		}
		if _, err := s.Write(append(size[:], body...)); err != nil {
			return
		}
	}
}
