package wan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Link parameters and addresses.
const (
	Namespace  = "ledgebench-wan"
	HostIF     = "lbwan0"
	ServerIF   = "lbwan1"
	HostAddr   = "10.213.77.1"
	ServerAddr = "10.213.77.2"
)

// Config is the link's shape.
type Config struct {
	RTT  time.Duration // round trip: each direction is delayed by half
	Loss float64       // share of packets dropped in each direction, 0..1
	Seed uint64        // the emulator's drop decisions
	// TCPCongestion is the congestion control of TCP inside the servers'
	// namespace (its sockets send the replies and the replays); the load
	// generator sets it on its own sockets (TCPCongestionControl). Empty
	// keeps the system's.
	TCPCongestion string
}

// Net is a built WAN: servers run in Namespace and listen on ServerAddr.
type Net struct {
	Mode string // "tc netem on a veth pair" or "userspace emulator on TUN devices"
	cfg  Config
	emu  *Emulator
}

// ErrUnavailable reports that this machine cannot build the WAN; the
// error says why.
var ErrUnavailable = errors.New("wan: unavailable")

// Setup builds the WAN, preferring tc netem. It removes what an earlier,
// interrupted run left behind first.
func Setup(ctx context.Context, cfg Config) (*Net, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: network namespaces need root", ErrUnavailable)
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: %s not found", ErrUnavailable, tool)
		}
	}
	teardown()
	n := &Net{cfg: cfg}
	netemErr := n.setupNetem(ctx)
	if netemErr == nil {
		return n, n.setCongestion(ctx)
	}
	teardown()
	emuErr := n.setupEmulator(ctx)
	if emuErr == nil {
		n.Mode = fmt.Sprintf("userspace emulator on TUN devices (tc netem unavailable: %v)", netemErr)
		return n, n.setCongestion(ctx)
	}
	teardown()
	return nil, fmt.Errorf("%w: tc netem: %v; TUN emulator: %v", ErrUnavailable, netemErr, emuErr)
}

func (n *Net) setupNetem(ctx context.Context) error {
	oneWay := fmt.Sprintf("%dus", (n.cfg.RTT / 2).Microseconds())
	loss := fmt.Sprintf("%g%%", n.cfg.Loss*100)
	steps := [][]string{
		{"ip", "netns", "add", Namespace},
		{"ip", "link", "add", HostIF, "type", "veth", "peer", "name", ServerIF},
		{"ip", "link", "set", ServerIF, "netns", Namespace},
		{"ip", "addr", "add", HostAddr + "/30", "dev", HostIF},
		{"ip", "link", "set", HostIF, "up"},
		{"ip", "-n", Namespace, "addr", "add", ServerAddr + "/30", "dev", ServerIF},
		{"ip", "-n", Namespace, "link", "set", ServerIF, "up"},
		{"ip", "-n", Namespace, "link", "set", "lo", "up"},
		// netem's default queue of 1000 packets would cap the rate at
		// 1000 packets per half round trip; the limit is raised so only
		// delay and loss shape the link.
		{"tc", "qdisc", "add", "dev", HostIF, "root", "netem", "delay", oneWay, "loss", loss, "limit", "100000"},
		{"ip", "netns", "exec", Namespace, "tc", "qdisc", "add", "dev", ServerIF, "root", "netem", "delay", oneWay, "loss", loss, "limit", "100000"},
	}
	if err := run(ctx, steps...); err != nil {
		return err
	}
	n.Mode = fmt.Sprintf("tc netem on a veth pair (delay %s each way, loss %s each way)", oneWay, loss)
	return nil
}

func (n *Net) setupEmulator(ctx context.Context) error {
	if err := run(ctx,
		[]string{"ip", "netns", "add", Namespace},
		[]string{"ip", "tuntap", "add", "dev", HostIF, "mode", "tun"},
		[]string{"ip", "tuntap", "add", "dev", ServerIF, "mode", "tun"},
	); err != nil {
		return err
	}
	// The descriptors are opened while both devices are in this
	// namespace; they stay attached when one moves.
	emu, err := NewEmulator(HostIF, ServerIF, n.cfg)
	if err != nil {
		return err
	}
	if err := run(ctx,
		[]string{"ip", "link", "set", ServerIF, "netns", Namespace},
		[]string{"ip", "addr", "add", HostAddr, "peer", ServerAddr, "dev", HostIF},
		[]string{"ip", "link", "set", HostIF, "up"},
		[]string{"ip", "-n", Namespace, "addr", "add", ServerAddr, "peer", HostAddr, "dev", ServerIF},
		[]string{"ip", "-n", Namespace, "link", "set", ServerIF, "up"},
		[]string{"ip", "-n", Namespace, "link", "set", "lo", "up"},
	); err != nil {
		emu.Close()
		return err
	}
	emu.Start()
	n.emu = emu
	return nil
}

// setCongestion gives TCP in the servers' namespace the configured
// congestion control where the kernel lets it, and says in Mode what each
// end runs. Linux lets a namespace other than the first choose only the
// algorithms of net.ipv4.tcp_allowed_congestion_control, a setting of
// the whole machine this package leaves alone; the servers then keep the
// default. Every WAN workload sends its data from the load generator,
// whose sockets set the algorithm themselves (TCPCongestionControl): the
// servers' choice governs only their replies.
func (n *Net) setCongestion(ctx context.Context) error {
	cc := n.cfg.TCPCongestion
	if cc == "" {
		return nil
	}
	err := run(ctx, []string{"ip", "netns", "exec", Namespace, "sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=" + cc})
	if err == nil {
		n.Mode += fmt.Sprintf("; TCP congestion control %s at both ends", cc)
		return nil
	}
	def := "the system's default"
	if b, rerr := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control"); rerr == nil {
		def = strings.TrimSpace(string(b))
	}
	n.Mode += fmt.Sprintf("; TCP congestion control %s on the load generator's sockets, %s on the servers' (the kernel refused %s in their namespace)", cc, def, cc)
	return nil
}

// Close tears the WAN down.
func (n *Net) Close() error {
	if n.emu != nil {
		n.emu.Close()
	}
	teardown()
	return nil
}

// Stats returns what the emulator forwarded and dropped (zero with netem).
func (n *Net) Stats() (forwarded, dropped int64) {
	if n.emu == nil {
		return 0, 0
	}
	return n.emu.Stats()
}

// Ping checks that the server side answers over the link; it returns the
// output of ping, whose round trip shows the delay.
func Ping(ctx context.Context) (string, error) {
	if _, err := exec.LookPath("ping"); err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, "ping", "-c", "3", "-i", "0.2", "-W", "2", ServerAddr).CombinedOutput()
	return string(out), err
}

// teardown removes the namespace and the host side of the link, ignoring
// what is not there.
func teardown() {
	_ = exec.Command("ip", "-n", Namespace, "link", "del", ServerIF).Run()
	_ = exec.Command("ip", "netns", "del", Namespace).Run()
	_ = exec.Command("ip", "link", "del", HostIF).Run()
}

func run(ctx context.Context, steps ...[]string) error {
	for _, s := range steps {
		out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
