package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ledgemq/ledge/internal/fleetload"
	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/sdk"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/spf13/cobra"
)

// fleetFlags are the parameters of ledge bench fleet.
type fleetFlags struct {
	devices       int
	cmdPartitions int
	interval      time.Duration
	jitter        float64
	cmdRate       float64
	warmup        time.Duration
	dialers       int
	perSocket     int
	nodeHTTP      string
}

func newBenchFleetCommand(cf *clientFlags, f *benchFlags) *cobra.Command {
	var ff fleetFlags
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Connect a fleet of devices, each producing and long-polling for commands; report latency, set-up rate and errors",
		Long: `Connect --devices devices, each on a QUIC connection of its own with a
token of its own (produce and consume, created here with the admin token),
each producing --size byte records every --interval (± --jitter) to
partition i mod --partitions of topic fleet, and holding a long poll for
its own key on partition i mod --cmd-partitions of topic fleet-cmd. A
controller writes --cmd-rate commands a second there, each keyed to one
device: the node wakes that device's poll alone, however many share the
partition. With the node in this process, or its HTTP listener given
(--node-http), the report says how many parked polls each command woke
and the node's garbage collections over the measured phase (a minute,
and their stop-the-world pauses added up). It also gives the UDP
datagrams sent per record, from the machine's counters (/proc/net/snmp,
Linux): the whole machine's, so on loopback the node's and the devices'
alike.

Produce latency runs from each record's scheduled send time, so a stall
cannot hide; command latency from the write to the device's poll
returning. The node must admit the fleet: quic.max_conns and
polls.max_parked above --devices, and quic.source_handshake_rate raised
or off (every device dials from this machine's one address). Without
--server the node runs in this process, sized so.`,
		Example: `  ledge bench fleet --devices 200
  ledge bench fleet --server 10.0.0.5:7420 --ca ca.pem --token "$ADMIN" --devices 5000 --duration 60s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchFleet(cmd, cf, f, &ff) },
	}
	fs := cmd.Flags()
	fs.IntVar(&ff.devices, "devices", 200, "device connections")
	fs.IntVar(&ff.cmdPartitions, "cmd-partitions", 64, "partitions of the commands topic")
	fs.DurationVar(&ff.interval, "interval", time.Second, "mean time between a device's records")
	fs.Float64Var(&ff.jitter, "jitter", 0.2, "each gap is interval·(1 ± jitter)")
	fs.Float64Var(&ff.cmdRate, "cmd-rate", 10, "commands a second across the fleet")
	fs.DurationVar(&ff.warmup, "warmup", 2*time.Second, "producing before the measured phase")
	fs.IntVar(&ff.dialers, "dialers", 32, "connections set up at once")
	fs.StringVar(&ff.nodeHTTP, "node-http", "", "with --server, the node's HTTP listener host:port: the report reads the parked polls each command woke from its /metrics")
	fs.IntVar(&ff.perSocket, "devices-per-socket", fleetload.DefaultDevicesPerSocket, "devices whose connections share one UDP socket of this process (0: a socket per device)")
	return cmd
}

// fleetGC is a node's collections over the measured phase.
type fleetGC struct {
	Cycles    uint64  `json:"cycles"`
	PerMinute float64 `json:"per_minute"`
	// PauseTotalMs is their stop-the-world pauses added up; the
	// concurrent mark between them is not counted.
	PauseTotalMs float64 `json:"pause_total_ms"`
}

// fleetSetup is what setting the fleet up cost the node.
type fleetSetup struct {
	CPUSec      float64 `json:"cpu_sec"`
	Handshakes  uint64  `json:"handshakes_completed"`
	Refused     uint64  `json:"refused"`
	Evicted     uint64  `json:"evicted"`
	Validations uint64  `json:"address_validations"`
}

// fleetReport is what ledge bench fleet prints.
type fleetReport struct {
	Target        string  `json:"target"`
	Devices       int     `json:"devices"`
	Connected     int     `json:"connected"`
	Held          int     `json:"held"`
	SetupSec      float64 `json:"setup_sec"`
	SetupPerSec   float64 `json:"setup_per_sec"`
	Records       int64   `json:"records"`
	Sent          int64   `json:"sent"`
	ProduceP50us  int64   `json:"produce_p50_us"`
	ProduceP99us  int64   `json:"produce_p99_us"`
	ProduceP999us int64   `json:"produce_p999_us"`
	Commands      int64   `json:"commands"`
	CmdDelivered  int64   `json:"commands_delivered"`
	CommandP50us  int64   `json:"command_p50_us"`
	CommandP99us  int64   `json:"command_p99_us"`
	// WakeupsPerCommand is how many parked key polls the node woke per
	// command (1: the device's alone), when the node is in this process
	// or --node-http names its HTTP listener.
	WakeupsPerCommand float64 `json:"wakeups_per_command,omitempty"`
	// DatagramsPerRecord is the UDP datagrams sent over the measured
	// phase per record, from the machine's counters (/proc/net/snmp): the
	// whole machine's, node and devices alike on loopback.
	DatagramsPerRecord float64 `json:"datagrams_per_record,omitempty"`
	// DatagramsDropped is the machine's datagrams dropped for a full
	// receive buffer over the measured phase (RcvbufErrors).
	DatagramsDropped uint64 `json:"datagrams_dropped_rcvbuf"`
	// NodeGC is the node's collections over the measured phase (its
	// /metrics with --node-http; this process's in-process); nil when
	// unknown.
	NodeGC *fleetGC `json:"node_gc,omitempty"`
	// Busy is the busy answers the devices got over the measured phase
	// (the node served nothing and hinted when to retry), and
	// BusyPerMinute the same a minute.
	Busy           int64   `json:"busy_answers"`
	BusyPerMinute  float64 `json:"busy_answers_per_minute"`
	Errors         int64   `json:"errors"`
	FirstError     string  `json:"first_error,omitempty"`
	NodeCPUPer1000 float64 `json:"node_cpu_sec_per_1000_records,omitempty"`
	// LoadCPUPer1000 is this process's CPU (the devices alone) per 1,000
	// records over the measured phase, against a node elsewhere.
	LoadCPUPer1000 float64 `json:"loadgen_cpu_sec_per_1000_records,omitempty"`
	// SetupNode is what the set-up cost the node, from its /metrics
	// (--node-http): its CPU, the handshakes it completed (beyond one a
	// device: dials made again), and the connections it refused, evicted
	// and asked to prove their address.
	SetupNode *fleetSetup `json:"setup_node,omitempty"`
}

func runBenchFleet(cmd *cobra.Command, cf *clientFlags, f *benchFlags, ff *fleetFlags) error {
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	p := fleetload.Params{Devices: ff.devices, Partitions: f.partitions, CmdPartitions: ff.cmdPartitions,
		Size: f.size, Interval: ff.interval, Jitter: ff.jitter, CmdRate: ff.cmdRate, Dialers: ff.dialers,
		Warmup: ff.warmup, Duration: f.duration, Seed: f.seed}
	if !cmd.Flags().Changed("size") {
		p.Size = 256
	}
	if !cmd.Flags().Changed("partitions") {
		p.Partitions = 4
	}
	sys, where, cleanup, err := openFleet(ctx, cf, ff.devices, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer cleanup()
	if ff.nodeHTTP != "" && sys.Wakeups == nil {
		sys.Wakeups = fleetload.MetricsWakeups(ff.nodeHTTP)
		sys.GC = fleetload.MetricsGC(ff.nodeHTTP)
		sys.Setup = fleetload.MetricsSetup(ff.nodeHTTP)
	}
	sys.DevicesPerSocket = ff.perSocket
	if ff.perSocket <= 0 {
		sys.DevicesPerSocket = -1
	}
	defer sys.Close()
	tc, err := (&topicCreateFlags{partitions: 1, durability: f.durability, compression: "none", timestamps: "producer", retentionAge: "0", retentionBytes: "0", segmentBytes: "0", segmentAge: "0", maxBatchBytes: "0"}).config()
	if err != nil {
		return err
	}
	sys.Durability = tc.Durability
	var c0, c1 time.Duration
	inProcess := where != ""
	if !inProcess {
		where = "node at " + sys.Addr
	}
	// The measured phase's CPU is this process's: the devices', and the
	// node's too when it runs here. --cpuprofile profiles the same phase.
	stopProfile := func() {}
	var profErr error
	hooks := fleetload.Hooks{
		Begin: func() {
			stopProfile, profErr = startProfile(f)
			c0, _ = processCPU()
		},
		End: func() {
			c1, _ = processCPU()
			stopProfile()
		},
	}
	res, err := fleetload.Run(ctx, sys, p, hooks)
	if err != nil {
		return err
	}
	if profErr != nil {
		return fmt.Errorf("--cpuprofile: %w", profErr)
	}
	r := fleetReport{Target: where, Devices: res.Devices, Connected: res.Connected, Held: res.Held,
		SetupSec: res.Setup.Seconds(), SetupPerSec: res.SetupRate(), Records: res.Records, Sent: res.Sent,
		ProduceP50us: res.Produce.Percentile(50).Microseconds(), ProduceP99us: res.Produce.Percentile(99).Microseconds(),
		ProduceP999us: res.Produce.Percentile(99.9).Microseconds(), Commands: res.CmdSent, CmdDelivered: res.CmdDelivered,
		CommandP50us: res.Command.Percentile(50).Microseconds(), CommandP99us: res.Command.Percentile(99).Microseconds(),
		Errors: res.Errors, FirstError: res.FirstErr}
	if res.SetupKnown {
		n := res.SetupNode
		r.SetupNode = &fleetSetup{CPUSec: n.CPUSeconds, Handshakes: n.Accepted, Refused: n.Refused,
			Evicted: n.Evicted, Validations: n.Validations}
	}
	if w, ok := res.WakeupsPerCommand(); ok {
		r.WakeupsPerCommand = w
	}
	if d, ok := res.DatagramsPerRecord(); ok {
		r.DatagramsPerRecord, r.DatagramsDropped = d, res.UDP.RcvbufErrors
	}
	if b, ok := res.BusyPerMinute(); ok {
		r.Busy, r.BusyPerMinute = res.Busy, b
	}
	if res.GCKnown {
		r.NodeGC = &fleetGC{Cycles: res.NodeGC.Cycles, PerMinute: res.NodeGC.PerMinute,
			PauseTotalMs: float64(res.NodeGC.PauseTotal) / float64(time.Millisecond)}
	}
	if res.Records > 0 {
		if inProcess {
			r.NodeCPUPer1000 = (c1 - c0).Seconds() / float64(res.Records) * 1000
		} else {
			r.LoadCPUPer1000 = (c1 - c0).Seconds() / float64(res.Records) * 1000
		}
	}
	printFleet(cmd.OutOrStdout(), r, f.jsonOut)
	if res.Errors > 0 {
		return fmt.Errorf("%d errors; the first: %s", res.Errors, res.FirstErr)
	}
	return nil
}

// openFleet connects to --server with the admin credentials, or starts a
// node in this process sized for the fleet (where names it then).
func openFleet(ctx context.Context, cf *clientFlags, devices int, stderr io.Writer) (*fleetload.Ledge, string, func(), error) {
	if cf.server != "" || os.Getenv(envServer) != "" {
		admin, err := cf.dial(ctx)
		if err != nil {
			return nil, "", nil, err
		}
		ca := firstNonEmpty(cf.ca, os.Getenv(envCA))
		if ca == "" {
			if dir := firstNonEmpty(cf.dataDir, os.Getenv(envDataDir)); dir != "" {
				ca = filepath.Join(dir, "tls", "ca.pem")
			}
		}
		var opts []sdk.Option
		if ca != "" {
			opts = append(opts, sdk.WithCAFile(ca))
		}
		return &fleetload.Ledge{Admin: admin, Addr: admin.Addr(), Options: opts}, "", func() { _ = admin.Close() }, nil
	}
	dir, err := os.MkdirTemp("", "ledge-fleet-")
	if err != nil {
		return nil, "", nil, err
	}
	tc := quic.Config{MaxConns: devices + 16, SourceHandshakeRate: -1}
	n, err := node.Open(ctx, node.Config{DataDir: dir, Listen: "127.0.0.1:0", RetentionInterval: -1,
		MaxParkedPolls: 2 * devices, Transport: tc,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", nil, fmt.Errorf("start a node: %w", err)
	}
	admin, err := sdk.Dial(ctx, n.Addr(), sdk.WithDataDir(dir))
	cleanup := func() {
		if admin != nil {
			_ = admin.Close()
		}
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = n.Close(c)
		_ = os.RemoveAll(dir)
	}
	if err != nil {
		cleanup()
		return nil, "", nil, err
	}
	sys := &fleetload.Ledge{Admin: admin, Addr: n.Addr(), Options: []sdk.Option{sdk.WithCAFile(filepath.Join(dir, "tls", "ca.pem"))},
		Wakeups: func(context.Context) (uint64, error) {
			return keyPollWakeups(n.Snapshot(ops.OffsetsOnly), fleetload.CmdTopic), nil
		},
		GC: func(context.Context) (fleetload.GCStats, error) { return fleetload.ProcessGC(), nil }}
	return sys, "in-process node on " + n.Addr() + " (its CPU shared with the devices)", cleanup, nil
}

// keyPollWakeups is the key poll wake-ups of topic's partitions.
func keyPollWakeups(s ops.Snapshot, topic string) uint64 {
	var n uint64
	for _, t := range s.Topics {
		if t.Name == topic {
			for _, p := range t.Parts {
				n += p.KeyPolls.Woken
			}
		}
	}
	return n
}

func printFleet(w io.Writer, r fleetReport, asJSON bool) {
	if asJSON {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		_ = e.Encode(r)
		return
	}
	us := func(v int64) string { return (time.Duration(v) * time.Microsecond).String() }
	fmt.Fprintf(w, "fleet against %s\n", r.Target)
	fmt.Fprintf(w, "devices:   %d connected of %d, %d held; set up in %.1fs (%.0f/s)\n", r.Connected, r.Devices, r.Held, r.SetupSec, r.SetupPerSec)
	if n := r.SetupNode; n != nil {
		fmt.Fprintf(w, "set-up:    the node's CPU %.1fs; %d handshakes completed, %d connections refused, %d evicted, %d asked to prove their address\n",
			n.CPUSec, n.Handshakes, n.Refused, n.Evicted, n.Validations)
	}
	fmt.Fprintf(w, "produce:   %d of %d records acknowledged; from the scheduled send: p50 %s, p99 %s, p99.9 %s\n",
		r.Records, r.Sent, us(r.ProduceP50us), us(r.ProduceP99us), us(r.ProduceP999us))
	fmt.Fprintf(w, "commands:  %d of %d delivered; write to poll return: p50 %s, p99 %s\n", r.CmdDelivered, r.Commands, us(r.CommandP50us), us(r.CommandP99us))
	if r.WakeupsPerCommand > 0 {
		fmt.Fprintf(w, "wake-ups:  %.2f parked polls woken per command (each device polls for its own key)\n", r.WakeupsPerCommand)
	}
	if r.DatagramsPerRecord > 0 {
		fmt.Fprintf(w, "datagrams: %.2f UDP datagrams sent per record, %d dropped for a full receive buffer (the machine's counters: node and devices alike)\n",
			r.DatagramsPerRecord, r.DatagramsDropped)
	}
	if r.Busy > 0 {
		fmt.Fprintf(w, "busy:      %.0f busy answers a minute (%d in the measured phase): the node shed them, the devices retried after its hint\n",
			r.BusyPerMinute, r.Busy)
	}
	if g := r.NodeGC; g != nil {
		fmt.Fprintf(w, "node GC:   %.1f collections a minute (%d in the measured phase), %.2f ms of stop-the-world pauses in all\n",
			g.PerMinute, g.Cycles, g.PauseTotalMs)
	}
	if r.NodeCPUPer1000 > 0 {
		fmt.Fprintf(w, "CPU:       %.3f s per 1,000 records (the whole process: node and devices)\n", r.NodeCPUPer1000)
	}
	if r.LoadCPUPer1000 > 0 {
		fmt.Fprintf(w, "CPU:       %.3f s per 1,000 records in this process (the devices; the node's own is not counted)\n", r.LoadCPUPer1000)
	}
	fmt.Fprintf(w, "errors:    %d\n", r.Errors)
	if r.FirstError != "" {
		fmt.Fprintf(w, "first:     %s\n", r.FirstError)
	}
}
