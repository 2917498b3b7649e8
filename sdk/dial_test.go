package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/internal/datadir"
	"github.com/ledgemq/ledge/sdk"
)

// closedUDPAddr returns a loopback address where no socket listens.
func closedUDPAddr(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := c.LocalAddr().String()
	_ = c.Close()
	return addr
}

// A Dial that finds nothing listening fails with ErrNodeUnreachable,
// says which address and where it came from, and does not wait out the
// dial timeout for it.
func TestDialNothingListeningIsUnreachable(t *testing.T) {
	addr := closedUDPAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name   string
		dial   func() (*sdk.Client, error)
		source sdk.AddrSource
		says   string
	}{
		{"given", func() (*sdk.Client, error) {
			return sdk.Dial(ctx, addr, sdk.WithToken("t"), sdk.WithDialTimeout(time.Hour))
		}, sdk.AddrGiven, "is this its QUIC address?"},
		{"LEDGE_SERVER", func() (*sdk.Client, error) {
			t.Setenv(sdk.EnvServer, addr)
			return sdk.Dial(ctx, "", sdk.WithToken("t"), sdk.WithDialTimeout(time.Hour))
		}, sdk.AddrEnv, "is LEDGE_SERVER its QUIC address?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.dial()
			var de *sdk.DialError
			if !errors.Is(err, sdk.ErrNodeUnreachable) || !errors.As(err, &de) {
				t.Fatalf("Dial of %s: %v, want a *DialError matching ErrNodeUnreachable", addr, err)
			}
			if de.Addr != addr || de.Source != tc.source || !de.NotListening {
				t.Errorf("DialError = %+v, want address %s from %v, nothing listening", de, addr, tc.source)
			}
			if msg := err.Error(); !strings.Contains(msg, "nothing listens at "+addr) || !strings.Contains(msg, tc.says) {
				t.Errorf("Dial's error says %q, want the address and %q", msg, tc.says)
			}
		})
	}
}

// A node that does not answer (a socket that reads and says nothing) is
// unreachable after the dial timeout, with the timeout as the cause.
func TestDialSilentAddressIsUnreachable(t *testing.T) {
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	_, err = sdk.Dial(context.Background(), silent.LocalAddr().String(), sdk.WithToken("t"), sdk.WithDialTimeout(100*time.Millisecond))
	var de *sdk.DialError
	if !errors.Is(err, sdk.ErrNodeUnreachable) || !errors.As(err, &de) || de.NotListening {
		t.Fatalf("Dial of a silent address: %v, want a *DialError matching ErrNodeUnreachable", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dial of a silent address: %v, want it to wrap context.DeadlineExceeded", err)
	}
}

// A refused token comes from a node that answered: it is not
// ErrNodeUnreachable.
func TestDialRefusedTokenIsNotUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := sdk.Dial(ctx, nodeAddr, sdk.WithDataDir(nodeDataDir), sdk.WithToken("not-a-token"))
	if err == nil || errors.Is(err, sdk.ErrNodeUnreachable) || !errors.Is(err, sdk.ErrUnauthenticated) {
		t.Fatalf("Dial with a bad token: %v, want ErrUnauthenticated and not ErrNodeUnreachable", err)
	}
}

// Dial with an empty address finds a node on any port through the
// listen file of its data directory; LEDGE_SERVER wins over it.
func TestDialEmptyAddressFindsTheNodeOfTheDataDirectory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := datadir.WriteListen(nodeDataDir, datadir.Listen{PID: os.Getpid(), QUIC: nodeAddr}); err != nil {
		t.Fatal(err)
	}
	defer datadir.RemoveListen(nodeDataDir)

	t.Setenv(sdk.EnvDataDir, nodeDataDir)
	c, err := sdk.Dial(ctx, "")
	if err != nil {
		t.Fatalf("Dial(ctx, \"\") with %s: %v", sdk.EnvDataDir, err)
	}
	if c.Addr() != nodeAddr {
		t.Errorf("Dial(ctx, \"\") dialed %s, the node listens on %s", c.Addr(), nodeAddr)
	}
	if _, err := c.ListTopics(ctx); err != nil {
		t.Error(err)
	}
	_ = c.Close()

	other := closedUDPAddr(t)
	t.Setenv(sdk.EnvServer, other)
	if addr, src, _ := sdk.DialAddr(""); addr != other || src != sdk.AddrEnv {
		t.Errorf("with LEDGE_SERVER and a listen file, DialAddr = %s from %v, want %s from LEDGE_SERVER", addr, src, other)
	}
}

// A node that cannot be reached is told apart from one that refused:
// the error says which address was dialed and where it came from.
func ExampleDialError() {
	ctx := context.Background()
	_, err := sdk.Dial(ctx, "127.0.0.1:1", sdk.WithToken("secret"))
	var de *sdk.DialError
	if errors.Is(err, sdk.ErrNodeUnreachable) && errors.As(err, &de) {
		fmt.Printf("no node at %s (%s)\n", de.Addr, de.Source)
	}
	// Output: no node at 127.0.0.1:1 (the address given to Dial)
}
