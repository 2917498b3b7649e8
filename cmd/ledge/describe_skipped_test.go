package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/sdk"
)

// TestDescribeShowsSkippedOffsets: topic describe counts records without
// the offsets a crash skipped, and group describe's lag leaves them out;
// both show them in a SKIPPED column, and neither has one when nothing
// was skipped.
func TestDescribeShowsSkippedOffsets(t *testing.T) {
	var b bytes.Buffer
	printPartitions(&b, []sdk.PartitionState{{Partition: 0, StartOffset: 0, HighWatermark: 1027, History: 2, Skipped: 1024}})
	lines := strings.Split(b.String(), "\n")
	if !strings.Contains(lines[0], "RECORDS  SKIPPED") {
		t.Fatalf("header %q: want a SKIPPED column after RECORDS", lines[0])
	}
	if f := strings.Fields(lines[1]); len(f) < 5 || f[3] != "3" || f[4] != "1024" {
		t.Fatalf("row %q: want 3 records and 1024 skipped", lines[1])
	}
	b.Reset()
	printPartitions(&b, []sdk.PartitionState{{Partition: 0, StartOffset: 2, HighWatermark: 9, History: 1}})
	if strings.Contains(b.String(), "SKIPPED") {
		t.Fatalf("SKIPPED shown with nothing skipped:\n%s", b.String())
	}
	if f := strings.Fields(strings.Split(b.String(), "\n")[1]); f[3] != "7" {
		t.Fatalf("row %v: want 7 records", f)
	}

	b.Reset()
	printGroup(&b, sdk.GroupDescription{
		GroupSummary: sdk.GroupSummary{Name: "g"},
		Offsets: []sdk.GroupOffset{{
			TopicPartition: sdk.TopicPartition{Topic: "t"}, Committed: true, Offset: 3, History: 1,
			Resume: 3, Lag: 0, Skipped: 1024,
		}},
	})
	out := b.String()
	i := strings.Index(out, "TOPIC")
	if i < 0 || !strings.Contains(out[i:], "SKIPPED") {
		t.Fatalf("no SKIPPED column:\n%s", out)
	}
	row := strings.Fields(strings.Split(out[i:], "\n")[1])
	// t 0 3 (history 1) 3 0 1024 -
	if len(row) < 8 || row[5] != "3" || row[6] != "0" || row[7] != "1024" {
		t.Fatalf("row %q: want resume 3, lag 0, 1024 skipped", row)
	}
}
