package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

// The key is the optional last field of a poll: a poll without one is the
// bytes it always was, so nodes that predate the field serve it; a poll
// with one adds its mode and key after the partitions.
func TestPollKeyIsAnOptionalLastField(t *testing.T) {
	plain := wire.PollRequest{MaxWait: 5, Partitions: []wire.PollPartition{{Topic: "commands", Partition: 3, Position: wire.Position{Mode: wire.PositionEnd}}}}
	before, err := plain.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	keyed := plain
	keyed.Key = wire.PollKey{Mode: wire.KeyExact, Key: []byte("device-7")}
	after, err := keyed.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte(nil), before...), 1, 8, 0)
	want = append(want, "device-7"...)
	if !bytes.Equal(after, want) {
		t.Fatalf("keyed poll:\n got %x\nwant %x", after, want)
	}
	var got wire.PollRequest
	if err := got.Decode(after); err != nil || got.Key.Mode != wire.KeyExact || string(got.Key.Key) != "device-7" {
		t.Fatalf("decoded key %v %q, %v", got.Key.Mode, got.Key.Key, err)
	}
	// Into the same request, a poll without a key has none.
	if err := got.Decode(before); err != nil || got.Key.Mode != wire.KeyAny || len(got.Key.Key) != 0 {
		t.Fatalf("decoded a plain poll into a keyed one: %v %q, %v", got.Key.Mode, got.Key.Key, err)
	}
}

// A key mode needs a key, and a key a mode; a key is at most
// MaxPollKeyLen bytes.
func TestPollKeyRefusesWhatItCannotMean(t *testing.T) {
	for name, k := range map[string]wire.PollKey{
		"mode without key": {Mode: wire.KeyPrefix},
		"key without mode": {Key: []byte("k")},
		"unknown mode":     {Mode: 3, Key: []byte("k")},
	} {
		m := wire.PollRequest{Key: k}
		if _, err := m.Encode(nil); !errors.Is(err, wire.StatusInvalidArgument) {
			t.Errorf("%s: encode err %v, want invalid argument", name, err)
		}
	}
	long := wire.PollRequest{Key: wire.PollKey{Mode: wire.KeyExact, Key: make([]byte, wire.MaxPollKeyLen+1)}}
	if _, err := long.Encode(nil); err == nil {
		t.Error("a key over the limit encoded")
	}
	plain, _ := (&wire.PollRequest{}).Encode(nil)
	for name, tail := range map[string][]byte{
		"mode 0":       {0, 1, 0, 'k'},
		"empty key":    {1, 0, 0},
		"unknown mode": {3, 1, 0, 'k'},
		"cut key":      {1, 2, 0, 'k'},
	} {
		var m wire.PollRequest
		if err := m.Decode(append(append([]byte(nil), plain...), tail...)); !errors.Is(err, wire.StatusMalformedRequest) {
			t.Errorf("%s: decode err %v, want malformed request", name, err)
		}
	}
}
