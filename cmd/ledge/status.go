package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ledgemq/ledge/internal/datadir"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/sdk"
	"github.com/spf13/cobra"
)

// statusAddrEnv names the node's HTTP address when --http-addr is not
// given.
const statusAddrEnv = "LEDGE_HTTP_ADDR"

// maxStatusBytes bounds the status document read from a node.
const maxStatusBytes = 32 << 20

func newStatusCommand() *cobra.Command {
	var (
		addr    string
		dataDir string
		asJSON  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print a node's health, topics, consumers and their lag",
		Long: `Print what the node's status page shows: health, the QUIC listener and its
connections, every topic and partition (offsets, history epoch, size,
throughput), every named consumer and group with its lag, and plugins.

It reads /api/status from the node's HTTP listener, which needs no token:
keep that listener on loopback or a trusted network. The listener is
--http-addr (or ` + statusAddrEnv + `), else the one a node running on the data
directory recorded in its listen file (./ledge-data, or --data-dir, or
LEDGE_DATA_DIR), else ` + ops.DefaultHTTPListen + `. --json prints the document as the node
sent it, for scripts.`,
		Example: `  ledge status
  ledge status --data-dir /var/lib/ledge
  ledge status --http-addr 192.168.1.10:7421
  ledge status --json | jq '.consumers[] | {name, lag}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			from := "--http-addr"
			if !cmd.Flags().Changed("http-addr") {
				addr, from = statusAddr(dataDir)
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			raw, st, err := fetchStatus(ctx, addr, from)
			if err != nil {
				return err
			}
			if asJSON {
				_, err := cmd.OutOrStdout().Write(raw)
				return err
			}
			return printStatus(cmd.OutOrStdout(), st)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "http-addr", ops.DefaultHTTPListen, "the node's HTTP listener, host:port or URL (env "+statusAddrEnv+"; default: the one of the node on the data directory, else "+ops.DefaultHTTPListen+")")
	f.StringVar(&dataDir, "data-dir", "", "a node's data directory, whose listen file names its HTTP listener (env "+envDataDir+"; default ./"+sdk.DefaultDataDir+")")
	f.BoolVar(&asJSON, "json", false, "print the status document as JSON")
	f.DurationVar(&timeout, "timeout", 5*time.Second, "give up after this long")
	return cmd
}

// statusAddr is the HTTP listener ledge status reads without
// --http-addr, and where it came from: statusAddrEnv, else the one
// recorded by a node running on the data directory (dataDir, else
// LEDGE_DATA_DIR, else ./ledge-data), else the default.
func statusAddr(dataDir string) (addr, from string) {
	if v := os.Getenv(statusAddrEnv); v != "" {
		return v, statusAddrEnv
	}
	dir := firstNonEmpty(dataDir, os.Getenv(envDataDir), sdk.DefaultDataDir)
	path := filepath.Join(dir, datadir.ListenFile)
	l, live, err := datadir.ReadListen(dir)
	switch {
	case err == nil && live && l.HTTP != "":
		return l.HTTP, path
	case err == nil && live:
		return ops.DefaultHTTPListen, "the default: the node of " + path + " serves no HTTP"
	case err == nil:
		return ops.DefaultHTTPListen, fmt.Sprintf("the default: %s is stale, the node that wrote it (pid %d) is gone", path, l.PID)
	}
	return ops.DefaultHTTPListen, "the default: no running node's listen file in " + dir
}

// statusURL turns host:port or a URL into the status endpoint's URL.
func statusURL(addr string) string {
	base := strings.TrimRight(addr, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return base + "/api/status"
}

// fetchStatus reads and decodes a node's status document.
func fetchStatus(ctx context.Context, addr, from string) ([]byte, ops.Status, error) {
	var st ops.Status
	url := statusURL(addr)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, st, fmt.Errorf("--http-addr %q is not host:port or a URL of a node's HTTP listener", addr)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// Refused, unreachable, unresolvable or silent: Go's words for each
		// (a dial, a URL) say less to a user than where to look.
		return nil, st, fmt.Errorf("no Ledge node's HTTP listener answered at %s (%s): is `ledge serve` running, "+
			"and is that the address of its --http-listen? --data-dir (or %s) names its data directory, --http-addr (or %s) the address",
			addr, from, envDataDir, statusAddrEnv)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusBytes))
	if err != nil {
		return nil, st, fmt.Errorf("the HTTP listener at %s stopped answering mid-document: retry ledge status", addr)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, st, fmt.Errorf("%s answered %s, not a status document: is --http-addr a Ledge node's HTTP listener?", url, resp.Status)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, st, fmt.Errorf("%s did not answer a status document: is --http-addr a Ledge node's HTTP listener?", url)
	}
	return raw, st, nil
}

// printStatus writes the status summary for a terminal.
func printStatus(w io.Writer, st ops.Status) error {
	health := "ready"
	if !st.Health.Ready {
		health = "NOT READY: " + st.Health.Reason
	}
	n, tr := st.Node, st.Transport
	fmt.Fprintf(w, "ledge %s · %s · up %s\n", n.Version, health, humanDuration(n.UptimeSeconds))
	fmt.Fprintf(w, "QUIC %s · %s · %s · %s in flight · %d/%d parked polls\n",
		orDash(n.Listen), plural(int(tr.ConnectionsOpen), "connection"), plural(int(tr.StreamsOpen), "stream"),
		plural(int(tr.RequestsInFlight), "request"), tr.ParkedPolls, tr.MaxParkedPolls)
	if n.DiskTotalBytes > 0 {
		fmt.Fprintf(w, "data %s · disk free %s of %s\n", orDash(n.DataDir), humanBytes(int64(n.DiskFreeBytes)), humanBytes(int64(n.DiskTotalBytes)))
	}

	fmt.Fprintln(w)
	if len(st.Topics) == 0 {
		fmt.Fprintln(w, "no topics")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPART\tSTART\tHIGH WATERMARK\tEPOCH\tRECORDS\tSIZE\tRECORDS/S\tBYTES/S\tSTATE")
		for _, t := range st.Topics {
			for _, p := range t.Partitions {
				state := "ok"
				if p.Failed != "" {
					state = "FAILED: " + p.Failed
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", t.Name, p.Partition, p.LogStart, p.HighWatermark,
					p.HistoryEpoch, p.Records, humanBytes(p.SizeBytes), humanRate(p.RecordsPerSecond), humanBytesRate(p.BytesPerSecond), state)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintln(w)
	if len(st.Consumers) == 0 {
		fmt.Fprintln(w, "no consumers with committed offsets")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CONSUMER\tKIND\tTOPIC\tLAG\tMEMBERS\tPOSITION BY PARTITION")
		for _, c := range st.Consumers {
			parts := make([]string, len(c.Partitions))
			for i, p := range c.Partitions {
				parts[i] = fmt.Sprintf("%d:%d(lag %d)", p.Partition, p.Position, p.Lag)
				if p.Member != "" {
					parts[i] += "@" + shortMemberID(p.Member)
				}
			}
			kind, members := c.Kind, "-"
			if c.Kind == "group" {
				members = strconv.Itoa(len(c.Members))
				if c.State != "" {
					kind = fmt.Sprintf("group (%s, epoch %d)", c.State, c.Epoch)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", c.Name, kind, c.Topic, c.Lag, members, strings.Join(parts, " "))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	if err := printStatusUplinks(w, st.Uplinks); err != nil {
		return err
	}
	if err := printStatusDownlinks(w, st.Downlinks); err != nil {
		return err
	}
	if err := printStatusTransforms(w, st.Transforms); err != nil {
		return err
	}

	fmt.Fprintln(w)
	if len(st.Plugins) == 0 {
		fmt.Fprintln(w, "no plugins")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PLUGIN\tKIND\tSTATE\tCALLS\tFAILURES\tTIMEOUTS\tTRAPS\tSTRIKES")
	for _, p := range st.Plugins {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", p.Name, p.Kind, p.State, p.Calls, p.Failures, p.Timeouts, p.Traps, p.Strikes)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// humanBytes is formatBytes, with "-" for a size the node does not know.
func humanBytes(n int64) string {
	if n < 0 {
		return "-"
	}
	return formatBytes(n)
}

func humanRate(r float64) string {
	switch {
	case r == 0:
		return "0"
	case r >= 100:
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.1f", r)
}

func humanBytesRate(r float64) string {
	if r == 0 {
		return "0"
	}
	return humanBytes(int64(r)) + "/s"
}

func humanDuration(s float64) string {
	d := time.Duration(s) * time.Second
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh%dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	return d.Round(time.Second).String()
}
