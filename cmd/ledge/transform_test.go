package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/sdk"
)

// A failing partition's status says how the plugin failed, as the host
// said it, and that the input is kept where it was.
func TestTransformStatusSaysThePluginsFailure(t *testing.T) {
	at := time.Date(2026, 12, 2, 7, 30, 0, 0, time.UTC)
	tr := sdk.Transform{Name: "minutes", Config: sdk.TransformConfig{Plugin: "perminute", From: "readings", To: "per-minute",
		Params: map[string]string{"key": "site"}},
		Partitions: []sdk.TransformPartition{
			{Partition: 0, Running: true, Committed: 120, HighWatermark: 120, RecordsIn: 120, RecordsOut: 4},
			{Partition: 1, Running: true, Committed: 40, HighWatermark: 90, Lag: 50, RecordsIn: 40, RecordsOut: 2,
				PluginFailures: 3, Errors: 3, LastErrorAt: at,
				LastError: `transform: plugin "perminute": plugins: plugin timed out: "perminute": ledge_transform exceeded its deadline of 100ms`},
		}}
	var out bytes.Buffer
	if err := printTransformStatus(&out, tr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"transform minutes: readings -> per-minute through perminute (key=site), failing",
		"partition 1 failed at 2026-12-02T07:30:00Z (input kept at 40, retrying): ",
		"exceeded its deadline of 100ms",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	if transformState(sdk.Transform{Paused: true}) != "paused" || transformState(sdk.Transform{Error: "gone"}) != "stopped" {
		t.Error("a paused or stopped transform is not said so")
	}
}

// ledge status has a line per transform, with its totals.
func TestStatusPrintsTransforms(t *testing.T) {
	var out bytes.Buffer
	if err := printStatusTransforms(&out, []ops.TransformStatus{{Name: "copy", From: "raw", To: "clean", Plugin: "pass",
		State: "running", Lag: 3, RecordsIn: 10, RecordsOut: 10}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "copy       raw   clean  pass    running  3    10  10") {
		t.Fatalf("ledge status:\n%s", out.String())
	}
}
