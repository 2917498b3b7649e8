package natsclient

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ledgemq/ledge/bench/internal/loadgen"
	"github.com/ledgemq/ledge/internal/fleetload"
)

// JetStream's fleet: device i publishes with acknowledgement to stream
// FLEET<i mod P> (subject fleet.<i mod P>) on a connection of its own,
// and subscribes to its own command subject cmd.<i>. The controller
// publishes each command to stream FLEETCMD (subjects cmd.>) and waits for
// its acknowledgement; the device's subscription receives it as the
// server routes the publish, the cheapest delivery JetStream offers (a
// pull consumer per device would be 10,000 consumers). The server has no
// per-device credentials: every connection is TLS, none authenticates.
type fleet struct {
	t loadgen.Target
	d *Driver
	p fleetload.Params
}

// Fleet is the fleet workload's JetStream side.
func Fleet(ctx context.Context, t loadgen.Target) (fleetload.System, error) {
	d, err := Dial(ctx, t)
	if err != nil {
		return nil, err
	}
	return &fleet{t: t, d: d}, nil
}

func (f *fleet) Prepare(ctx context.Context, p fleetload.Params) error {
	f.p = p
	streams := map[string]string{"FLEETCMD": "cmd.>"}
	for i := range p.Partitions {
		streams["FLEET"+strconv.Itoa(i)] = "fleet." + strconv.Itoa(i)
	}
	for name, subj := range streams {
		_, err := f.d.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subj},
			Storage: jetstream.FileStorage, Replicas: 1, Retention: jetstream.LimitsPolicy, MaxMsgs: -1, MaxBytes: -1})
		if err != nil {
			return fmt.Errorf("natsclient: create stream %s: %w", name, err)
		}
	}
	return nil
}

func (f *fleet) Device(ctx context.Context, i int) (fleetload.Device, error) {
	nc, err := connect(f.t)
	if err != nil {
		return nil, err
	}
	d := &fleetDevice{nc: nc, subj: "fleet." + strconv.Itoa(i%f.p.Partitions), cmds: make(chan *nats.Msg, 64),
		pending: map[*nats.Msg]func(error){}}
	if d.sub, err = nc.ChanSubscribe("cmd."+strconv.Itoa(i), d.cmds); err != nil {
		nc.Close()
		return nil, err
	}
	d.js, err = jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(16),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) { d.finish(m, nil) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) { d.finish(m, err) }))
	if err != nil {
		nc.Close()
		return nil, err
	}
	// The subscription is in place at the server before the device
	// counts as connected.
	if err := nc.FlushWithContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return d, nil
}

func (f *fleet) Controller(ctx context.Context) (fleetload.Controller, error) {
	return fleetController{js: f.d.js}, nil
}

func (f *fleet) Close() error { return f.d.Close() }

type fleetDevice struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	sub     *nats.Subscription
	subj    string
	cmds    chan *nats.Msg
	mu      sync.Mutex
	pending map[*nats.Msg]func(error)
}

func (d *fleetDevice) Send(payload []byte, done func(error)) {
	m := &nats.Msg{Subject: d.subj, Data: payload}
	d.mu.Lock()
	d.pending[m] = done
	d.mu.Unlock()
	if _, err := d.js.PublishMsgAsync(m); err != nil {
		d.finish(m, err)
	}
}

func (d *fleetDevice) finish(m *nats.Msg, err error) {
	d.mu.Lock()
	done := d.pending[m]
	delete(d.pending, m)
	d.mu.Unlock()
	if done != nil {
		done(err)
	}
}

func (d *fleetDevice) Commands(ctx context.Context, got func([]byte)) error {
	for {
		select {
		case m := <-d.cmds:
			got(m.Data)
		case <-ctx.Done():
			return nil
		}
	}
}

func (d *fleetDevice) Alive() bool { return d.nc.IsConnected() }

func (d *fleetDevice) Close() error {
	d.nc.Close()
	return nil
}

type fleetController struct{ js jetstream.JetStream }

func (c fleetController) Command(ctx context.Context, i int, payload []byte) error {
	_, err := c.js.Publish(ctx, "cmd."+strconv.Itoa(i), payload)
	return err
}

func (fleetController) Close() error { return nil }
