package sdk

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"testing/synctest"
)

// A member joins with the client id it was given, and without one with
// the program's name and process id.
func TestGroupConsumerClientID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeGroupNode()
		newTestGroupConsumer(t, n, WithGroupClientID("sensor-7"))
		if n.clientID != "sensor-7" {
			t.Fatalf("joined with client id %q, want sensor-7", n.clientID)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		n := newFakeGroupNode()
		newTestGroupConsumer(t, n)
		want := filepath.Base(os.Args[0]) + "-" + strconv.Itoa(os.Getpid())
		if n.clientID != want {
			t.Fatalf("joined with client id %q, want the program's name and pid %q", n.clientID, want)
		}
	})
}
