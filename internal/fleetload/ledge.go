package fleetload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

// Ledge's fleet: devices produce to topic Topic (device i to partition
// i mod P) and poll topic CmdTopic for their own key (device i its
// partition i mod CmdPartitions, key i, from its end, waiting up to
// CmdWait). The controller writes a command for device i to that
// partition, keyed by the device: the node wakes only the poll of that
// key, however many devices share the partition.
const (
	Topic    = "fleet"
	CmdTopic = "fleet-cmd"
	CmdWait  = 30 * time.Second
)

// Ledge is a Ledge node as a fleet's System. Each device dials with a
// token of its own, scoped to produce and consume (no admin).
type Ledge struct {
	// Admin is a client with the admin scope: it creates the topics and
	// the tokens.
	Admin *sdk.Client
	// Addr and Options are how devices dial (the CA; the token is added
	// per device).
	Addr    string
	Options []sdk.Option
	// Durability of the fleet's topics.
	Durability sdk.Durability
	// DevicesPerSocket is how many devices' connections share one UDP
	// socket (sdk.Transport), as a gateway relaying for them would. 0:
	// DefaultDevicesPerSocket; negative: a socket per device.
	DevicesPerSocket int

	// Wakeups, when set, reads the node's count of key poll wake-ups on
	// CmdTopic (MetricsWakeups reads it from a node's /metrics); the
	// fleet then reports the wake-ups per command.
	Wakeups func(ctx context.Context) (uint64, error)
	// GC, when set, reads the node's collections (MetricsGC from a
	// node's /metrics, ProcessGC for a node in this process); the fleet
	// then reports them over the measured phase.
	GC func(ctx context.Context) (GCStats, error)
	// Setup, when set, reads the node's set-up counters (MetricsSetup
	// from a node's /metrics); the fleet then reports what its set-up
	// cost the node.
	Setup func(ctx context.Context) (SetupStats, error)

	p       Params
	tokens  []string
	sockets []*sdk.Transport
}

// DefaultDevicesPerSocket: 10,000 devices share 20 sockets, and 20
// goroutines read them, where a socket per device had 10,000 of each.
const DefaultDevicesPerSocket = 500

// Prepare creates the topics and one token per device.
func (l *Ledge) Prepare(ctx context.Context, p Params) error {
	l.p = p
	for _, t := range []struct {
		name  string
		parts int
	}{{Topic, p.Partitions}, {CmdTopic, p.CmdPartitions}} {
		if _, err := l.Admin.CreateTopic(ctx, t.name, sdk.TopicConfig{Partitions: t.parts, Durability: l.Durability, Compression: sdk.CompressionNone}); err != nil {
			return fmt.Errorf("create topic %s: %w", t.name, err)
		}
	}
	l.tokens = make([]string, p.Devices)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	sem := make(chan struct{}, 8)
	for i := range l.tokens {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, secret, err := l.Admin.CreateToken(ctx, sdk.TokenSpec{Label: "device-" + strconv.Itoa(i),
				Topic: sdk.AllTopics, Scopes: sdk.ScopeProduce | sdk.ScopeConsume})
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
				return
			}
			l.tokens[i] = secret
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("create device tokens: %w", err)
	}
	per := l.DevicesPerSocket
	if per == 0 {
		per = DefaultDevicesPerSocket
	}
	if per > 0 {
		for range (p.Devices + per - 1) / per {
			t, err := sdk.NewTransport()
			if err != nil {
				return err
			}
			l.sockets = append(l.sockets, t)
		}
	}
	return nil
}

// Device dials device i with its token and opens its producer and its
// command consumer.
func (l *Ledge) Device(ctx context.Context, i int) (Device, error) {
	opts := append(append([]sdk.Option(nil), l.Options...), sdk.WithToken(l.tokens[i]))
	if len(l.sockets) > 0 {
		opts = append(opts, sdk.WithTransport(l.sockets[i%len(l.sockets)]))
	}
	c, err := sdk.Dial(ctx, l.Addr, opts...)
	if err != nil {
		return nil, err
	}
	prod, err := c.NewProducer(ctx, Topic,
		sdk.WithPartitioner(sdk.ManualPartitioner()),
		sdk.WithLinger(0),
		sdk.WithMaxInFlight(16),
		sdk.WithCompression(sdk.CompressionNone))
	if err != nil {
		c.Close()
		return nil, err
	}
	cons, err := c.NewConsumer(ctx, CmdTopic,
		sdk.WithPartitions(int32(i%l.p.CmdPartitions)),
		sdk.WithKey(deviceKey(i)),
		sdk.WithStart(sdk.AtEnd()),
		sdk.WithMaxWait(CmdWait),
		sdk.WithPrefetch(false))
	if err != nil {
		_ = prod.Close(ctx)
		c.Close()
		return nil, err
	}
	return &ledgeDevice{c: c, prod: prod, cons: cons, part: int32(i % l.p.Partitions)}, nil
}

// deviceKey is the key of device i's commands.
func deviceKey(i int) []byte { return strconv.AppendInt(nil, int64(i), 10) }

// CommandWakeups implements WakeCounter with Wakeups.
func (l *Ledge) CommandWakeups(ctx context.Context) (uint64, bool, error) {
	if l.Wakeups == nil {
		return 0, false, nil
	}
	n, err := l.Wakeups(ctx)
	return n, err == nil, err
}

// NodeGC implements GCCounter with GC.
func (l *Ledge) NodeGC(ctx context.Context) (GCStats, bool, error) {
	if l.GC == nil {
		return GCStats{}, false, nil
	}
	s, err := l.GC(ctx)
	return s, err == nil, err
}

// NodeSetup implements SetupCounter with Setup.
func (l *Ledge) NodeSetup(ctx context.Context) (SetupStats, bool, error) {
	if l.Setup == nil {
		return SetupStats{}, false, nil
	}
	s, err := l.Setup(ctx)
	return s, err == nil, err
}

// MetricsWakeups returns a Ledge.Wakeups that reads the node's metrics
// at http://httpAddr/metrics: the sum of
// ledge_partition_key_poll_wakeups_total over CmdTopic's partitions.
func MetricsWakeups(httpAddr string) func(ctx context.Context) (uint64, error) {
	return func(ctx context.Context) (uint64, error) {
		body, err := getMetrics(ctx, httpAddr)
		if err != nil {
			return 0, err
		}
		defer body.Close()
		return sumWakeups(body)
	}
}

// sumWakeups adds up the key poll wake-ups of CmdTopic in a metrics
// exposition.
func sumWakeups(r io.Reader) (uint64, error) {
	const name = "ledge_partition_key_poll_wakeups_total{"
	topic := `topic="` + CmdTopic + `"`
	var sum float64
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || !strings.Contains(line, topic) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics: %q: %w", line, err)
		}
		sum += v
	}
	return uint64(sum), sc.Err()
}

// Controller dials the command writer with the admin client's options.
func (l *Ledge) Controller(ctx context.Context) (Controller, error) {
	prod, err := l.Admin.NewProducer(ctx, CmdTopic,
		sdk.WithPartitioner(sdk.ManualPartitioner()),
		sdk.WithLinger(0),
		sdk.WithCompression(sdk.CompressionNone))
	if err != nil {
		return nil, err
	}
	return &ledgeController{prod: prod, parts: l.p.CmdPartitions}, nil
}

// Close closes the devices' shared sockets (call it once the devices are
// closed); the admin client is the caller's.
func (l *Ledge) Close() error {
	var errs []error
	for _, t := range l.sockets {
		errs = append(errs, t.Close())
	}
	l.sockets = nil
	return errors.Join(errs...)
}

type ledgeDevice struct {
	c    *sdk.Client
	prod *sdk.Producer
	cons *sdk.Consumer
	part int32
	dead atomic.Bool
}

func (d *ledgeDevice) Send(payload []byte, done func(error)) {
	d.prod.Produce(context.Background(), &sdk.Record{Partition: d.part, Value: payload},
		func(_ *sdk.Record, err error) { done(err) })
}

func (d *ledgeDevice) Commands(ctx context.Context, got func([]byte)) error {
	for ctx.Err() == nil {
		recs, err := d.cons.Poll(ctx)
		for _, r := range recs {
			got(r.Value)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, sdk.ErrBusy) {
				continue // the next poll waits the node's retry-after
			}
			d.dead.Store(true)
			return err
		}
	}
	return nil
}

func (d *ledgeDevice) Alive() bool { return !d.dead.Load() }

// Busy implements BusyCounter: the busy answers of the device's producer
// and consumer.
func (d *ledgeDevice) Busy() uint64 { return d.prod.Stats().Busy + d.cons.Stats().Busy }

// Close gives the producer and the consumer a second to end: a device
// whose connection has died would otherwise dial again to close them. A
// device known dead (its poll failed) only closes its client: thousands
// of them redialing at once to close would queue on their shared
// sockets' lock.
func (d *ledgeDevice) Close() error {
	if d.dead.Load() {
		return d.c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = d.prod.Close(ctx)
	_ = d.cons.Close(ctx)
	return d.c.Close()
}

type ledgeController struct {
	prod  *sdk.Producer
	parts int
}

func (c *ledgeController) Command(ctx context.Context, i int, payload []byte) error {
	done := make(chan error, 1)
	c.prod.Produce(ctx, &sdk.Record{Partition: int32(i % c.parts), Key: deviceKey(i), Value: payload},
		func(_ *sdk.Record, err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (c *ledgeController) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.prod.Close(ctx)
}
