package fleetload

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
)

// Twenty devices on a node in this process, each with its own token:
// every record is acknowledged and every command reaches its device.
func TestLedgeFleetOf20OnANode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for a few seconds of real time")
	}
	dir := t.TempDir()
	n, err := node.Open(t.Context(), node.Config{DataDir: dir, Listen: "127.0.0.1:0", RetentionInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(t.Context())
	admin, err := sdk.Dial(t.Context(), n.Addr(), sdk.WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	sys := &Ledge{Admin: admin, Addr: n.Addr(), Options: []sdk.Option{sdk.WithCAFile(filepath.Join(dir, "tls", "ca.pem"))},
		Durability: sdk.DurabilityNone}
	res, err := Run(t.Context(), sys, Params{Devices: 20, Interval: 200 * time.Millisecond, CmdRate: 20,
		Settle: 300 * time.Millisecond, Duration: 2 * time.Second, Grace: 5 * time.Second}, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Connected != 20 || res.Held != 20 || res.Errors != 0 {
		t.Fatalf("connected %d, held %d, errors %d (%s); want 20, 20, 0", res.Connected, res.Held, res.Errors, res.FirstErr)
	}
	if res.Sent == 0 || res.Records != res.Sent {
		t.Fatalf("%d of %d records acknowledged", res.Records, res.Sent)
	}
	if res.CmdSent == 0 || res.CmdDelivered != res.CmdSent {
		t.Fatalf("%d of %d commands delivered", res.CmdDelivered, res.CmdSent)
	}
	tokens, err := admin.ListTokens(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) < 20 {
		t.Fatalf("%d tokens, want one per device", len(tokens))
	}
}
