package ledgeclient

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/ledgemq/ledge/bench/internal/loadgen"
	"github.com/ledgemq/ledge/internal/fleetload"
	"github.com/ledgemq/ledge/sdk"
)

// Fleet is the fleet workload's Ledge side (fleetload.Ledge): the admin
// client of t's data directory creates the topics and a token per
// device, produce and consume only; devices dial with their token and
// the node's CA. Topics at durability none (T0). With httpAddr, the
// node's HTTP listener, the fleet reads its key poll wake-ups from its
// metrics (fleetload.MetricsWakeups), and its collections
// (fleetload.MetricsGC).
func Fleet(ctx context.Context, t loadgen.Target, httpAddr string) (fleetload.System, error) {
	admin, err := dial(ctx, t)
	if err != nil {
		return nil, err
	}
	f := &fleetSystem{Ledge: fleetload.Ledge{Admin: admin, Addr: t.Addr,
		Options:    []sdk.Option{sdk.WithCAFile(filepath.Join(t.DataDir, "tls", "ca.pem"))},
		Durability: sdk.DurabilityNone}}
	if httpAddr != "" {
		f.Wakeups = fleetload.MetricsWakeups(httpAddr)
		f.GC = fleetload.MetricsGC(httpAddr)
	}
	return f, nil
}

// fleetSystem closes its admin client.
type fleetSystem struct{ fleetload.Ledge }

func (f *fleetSystem) Close() error { return errors.Join(f.Ledge.Close(), f.Admin.Close()) }
