package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

func rawFrame(length uint32, version uint8, flags wire.FrameFlags, kind wire.Kind, id uint32, body []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, length)
	b = append(b, version, byte(flags))
	b = binary.LittleEndian.AppendUint16(b, uint16(kind))
	b = binary.LittleEndian.AppendUint32(b, id)
	return append(b, body...)
}

func TestFrameHeaderLayout(t *testing.T) {
	got, err := wire.AppendFrame(nil, wire.FrameHeader{Version: 1, Flags: wire.FlagReply, Kind: wire.KindPoll, ID: 0x01020304}, []byte("xyz"))
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{11, 0, 0, 0, 1, 1, 0x21, 0, 4, 3, 2, 1, 'x', 'y', 'z'}
	if !bytes.Equal(got, want) {
		t.Fatalf("frame % x\nwant  % x", got, want)
	}
}

func TestReadFrameSequenceReusesBuffer(t *testing.T) {
	var stream []byte
	for i := range 3 {
		var err error
		stream, err = wire.AppendRequest(stream, uint32(i), &wire.DescribeTopicRequest{Name: strings.Repeat("t", i)})
		if err != nil {
			t.Fatal(err)
		}
	}
	r := bytes.NewReader(stream)
	buf := make([]byte, 0, 64)
	for i := range 3 {
		f, err := wire.ReadFrame(r, buf, 1024)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if &f.Body[:1][0] != &buf[:1][0] {
			t.Fatalf("frame %d: buffer not reused", i)
		}
		var m wire.DescribeTopicRequest
		if err := wire.DecodeRequest(f, &m); err != nil || m.Name != strings.Repeat("t", i) || f.ID != uint32(i) {
			t.Fatalf("frame %d: %+v %v", i, m, err)
		}
		buf = f.Body[:0]
	}
	if _, err := wire.ReadFrame(r, buf, 1024); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestReadFrameErrors(t *testing.T) {
	ok := rawFrame(8+3, 1, 0, wire.KindPoll, 7, []byte("abc"))
	cases := []struct {
		name   string
		stream []byte
		limit  int
		check  func(error) bool
	}{
		{"empty stream", nil, 100, func(err error) bool { return err == io.EOF }},
		{"half a header", ok[:5], 100, func(err error) bool { return err == io.ErrUnexpectedEOF }},
		{"half a body", ok[:13], 100, func(err error) bool { return err == io.ErrUnexpectedEOF }},
		{"length below header", rawFrame(7, 1, 0, wire.KindPoll, 7, nil), 100,
			func(err error) bool { return errors.Is(err, wire.StatusMalformedRequest) }},
		{"too large", ok, 2, func(err error) bool {
			var e *wire.FrameTooLargeError
			return errors.As(err, &e) && errors.Is(err, wire.StatusMessageTooLarge) &&
				e.Size == 15 && e.Max == 2 && e.Header.ID == 7 && e.Header.Kind == wire.KindPoll
		}},
		{"huge declared length", rawFrame(0xFFFFFFFF, 1, 0, wire.KindProduce, 1, nil), wire.DefaultMaxFrameSize,
			func(err error) bool { return errors.Is(err, wire.StatusMessageTooLarge) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := wire.ReadFrame(bytes.NewReader(c.stream), nil, c.limit)
			if !c.check(err) {
				t.Fatalf("unexpected error %v", err)
			}
		})
	}
}

// A frame too large for the reader can be skipped, and the stream goes on.
func TestSkipTooLargeFrame(t *testing.T) {
	stream := rawFrame(8+100, 1, 0, wire.KindProduce, 1, make([]byte, 100))
	stream, _ = wire.AppendRequest(stream, 2, &wire.ListTopicsRequest{})
	r := bytes.NewReader(stream)
	_, err := wire.ReadFrame(r, nil, 20)
	var tooLarge *wire.FrameTooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("err %v", err)
	}
	reply := wire.AppendErrorReply(nil, tooLarge.Header, wire.StatusMessageTooLarge, err.Error())
	if _, err := io.CopyN(io.Discard, r, int64(tooLarge.Size-wire.FrameHeaderSize)); err != nil {
		t.Fatal(err)
	}
	f, err := wire.ReadFrame(r, nil, 20)
	if err != nil || f.ID != 2 || f.Kind != wire.KindListTopics {
		t.Fatalf("next frame %+v, %v", f.FrameHeader, err)
	}
	rf, _ := wire.ReadFrame(bytes.NewReader(reply), nil, 1<<20)
	if err := wire.DecodeReply(rf, &wire.ProduceReply{}); !errors.Is(err, wire.StatusMessageTooLarge) || rf.ID != 1 {
		t.Fatalf("reply: %v (id %d)", err, rf.ID)
	}
}

func TestCheckRequest(t *testing.T) {
	cases := []struct {
		h    wire.FrameHeader
		want wire.Status
	}{
		{wire.FrameHeader{Version: 1, Kind: wire.KindPoll}, wire.StatusOK},
		{wire.FrameHeader{Version: 2, Kind: wire.KindPoll}, wire.StatusUnsupportedVersion},
		{wire.FrameHeader{Version: 0, Kind: wire.KindPoll}, wire.StatusUnsupportedVersion},
		{wire.FrameHeader{Version: 1, Kind: 0}, wire.StatusUnknownKind},
		{wire.FrameHeader{Version: 1, Kind: 0x7777}, wire.StatusUnknownKind},
		{wire.FrameHeader{Version: 1, Kind: 0x0052}, wire.StatusUnknownKind},
		{wire.FrameHeader{Version: 1, Kind: 0xFF00}, wire.StatusUnknownKind},
		{wire.FrameHeader{Version: 1, Flags: wire.FlagReply, Kind: wire.KindPoll}, wire.StatusMalformedRequest},
		{wire.FrameHeader{Version: 1, Flags: 0x80, Kind: wire.KindPoll}, wire.StatusMalformedRequest},
	}
	for _, c := range cases {
		err := wire.CheckRequest(c.h)
		if got := wire.StatusOf(err); got != c.want {
			t.Errorf("%+v: %v, want %v", c.h, err, c.want)
		}
		if err != nil && !strings.Contains(err.Error(), c.want.String()) {
			t.Errorf("%+v: message %q does not say %q", c.h, err, c.want)
		}
	}
}

// A node answers a frame of a future version with an error reply that an
// old or new client can read: the header and the status prefix of a reply
// keep their layout in every version.
func TestUnsupportedVersionReply(t *testing.T) {
	req := rawFrame(8+5, 9, 0, wire.Kind(0x0999), 42, []byte("?????"))
	f, err := wire.ReadFrame(bytes.NewReader(req), nil, 1024)
	if err != nil {
		t.Fatal(err)
	}
	cerr := wire.CheckRequest(f.FrameHeader)
	reply := wire.AppendErrorReply(nil, f.FrameHeader, wire.StatusOf(cerr), cerr.Error())
	rf, err := wire.ReadFrame(bytes.NewReader(reply), nil, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if rf.ID != 42 || rf.Kind != 0x0999 || !rf.IsReply() || rf.Version != wire.ProtocolVersion {
		t.Fatalf("reply header %+v", rf.FrameHeader)
	}
	status, msg, payload, err := wire.ParseReply(rf.Body)
	if err != nil || status != wire.StatusUnsupportedVersion || len(payload) != 0 || !strings.Contains(msg, "version 9") {
		t.Fatalf("status %v msg %q payload %q err %v", status, msg, payload, err)
	}
}

func TestDecodeReplyChecks(t *testing.T) {
	reqFrame, _ := wire.AppendRequest(nil, 1, &wire.ListTopicsRequest{})
	okReply, _ := wire.AppendReply(nil, 1, &wire.ListTopicsReply{})
	errReply := wire.AppendErrorReply(nil, wire.FrameHeader{Kind: wire.KindListTopics, ID: 1}, wire.StatusForbidden, "no admin scope")
	// A payload after a non-OK status is malformed.
	badErr := append([]byte(nil), errReply...)
	badErr = append(badErr, 0)
	binary.LittleEndian.PutUint32(badErr, binary.LittleEndian.Uint32(badErr)+1)

	cases := []struct {
		name  string
		frame []byte
		m     wire.Message
		want  wire.Status
	}{
		{"ok", okReply, &wire.ListTopicsReply{}, wire.StatusOK},
		{"request as reply", reqFrame, &wire.ListTopicsReply{}, wire.StatusMalformedRequest},
		{"wrong kind", okReply, &wire.ListTokensReply{}, wire.StatusMalformedRequest},
		{"error status", errReply, &wire.ListTopicsReply{}, wire.StatusForbidden},
		{"payload after error", badErr, &wire.ListTopicsReply{}, wire.StatusMalformedRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := wire.ReadFrame(bytes.NewReader(c.frame), nil, 1024)
			if err != nil {
				t.Fatal(err)
			}
			err = wire.DecodeReply(f, c.m)
			if got := wire.StatusOf(err); got != c.want {
				t.Fatalf("err %v, want %v", err, c.want)
			}
		})
	}
	f, _ := wire.ReadFrame(bytes.NewReader(errReply), nil, 1024)
	var e *wire.Error
	if err := wire.DecodeReply(f, &wire.ListTopicsReply{}); !errors.As(err, &e) || e.Message != "no admin scope" ||
		e.RetryClass() != wire.ClassGiveUp {
		t.Fatalf("error reply decoded as %#v", err)
	}
}

func TestDecodeRequestChecksKind(t *testing.T) {
	frame, _ := wire.AppendRequest(nil, 1, &wire.ListTopicsRequest{})
	f, _ := wire.ReadFrame(bytes.NewReader(frame), nil, 1024)
	if err := wire.DecodeRequest(f, &wire.ListTokensRequest{}); !errors.Is(err, wire.StatusMalformedRequest) {
		t.Fatalf("err %v", err)
	}
}

func TestAppendErrorReplyNeverFails(t *testing.T) {
	huge := strings.Repeat("\xff", 3*wire.MaxTextLen)
	reply := wire.AppendErrorReply([]byte("x"), wire.FrameHeader{Kind: wire.KindProduce, ID: 3}, wire.StatusInternal, huge)
	f, err := wire.ReadFrame(bytes.NewReader(reply[1:]), nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	status, msg, _, err := wire.ParseReply(f.Body)
	if err != nil || status != wire.StatusInternal || len(msg) > wire.MaxTextLen || msg == "" {
		t.Fatalf("status %v, %d-byte message, err %v", status, len(msg), err)
	}
}

// A transport that moves whole frames bounds them with FrameLen and hands
// them over for ParseFrame.
func TestWholeFrames(t *testing.T) {
	frame, _ := wire.AppendRequest(nil, 5, &wire.DescribeTopicRequest{Name: "t"})
	n, err := wire.FrameLen(frame[:wire.FrameHeaderSize])
	if err != nil || n != len(frame) {
		t.Fatalf("FrameLen %d, %v; frame is %d bytes", n, err, len(frame))
	}
	f, err := wire.ParseFrame(frame, len(frame))
	if err != nil || f.ID != 5 || &f.Body[0] != &frame[wire.FrameHeaderSize] {
		t.Fatalf("ParseFrame: %+v %v", f, err)
	}
	if _, err := wire.ParseFrame(frame, len(frame)-1); !errors.Is(err, wire.StatusMessageTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := wire.ParseFrame(frame[:len(frame)-1], len(frame)); !errors.Is(err, wire.StatusMalformedRequest) {
		t.Fatalf("short frame: %v", err)
	}
	if _, err := wire.FrameLen(frame[:4]); !errors.Is(err, wire.StatusMalformedRequest) {
		t.Fatalf("short header: %v", err)
	}
}
