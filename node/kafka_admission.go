package node

import (
	"errors"
	"net"

	"github.com/ledgemq/ledge/node/kafka"
	"github.com/ledgemq/ledge/transport/quic"
)

// kafkaAdmission lends the QUIC listener's admission to the Kafka
// listener, so that the connections of both count against one cap of
// unauthenticated connections (quic.max_unauthenticated) and one of
// authenticated ones (quic.max_conns, sized from memory), and one per
// token. It lives apart from kafka_adapter.go, which
// touches no QUIC type.
type kafkaAdmission struct{ a *quic.Admission }

func (k kafkaAdmission) Admit(remote net.Addr) (kafka.Place, error) {
	p, err := k.a.Admit(remote)
	if err != nil {
		return nil, kafkaAdmissionError(err)
	}
	return kafkaPlace{p}, nil
}

type kafkaPlace struct{ p *quic.Place }

func (k kafkaPlace) Authenticated(tokenID string) error {
	return kafkaAdmissionError(k.p.Authenticated(tokenID))
}

func (k kafkaPlace) OnEvicted(f func()) func() bool { return k.p.OnEvicted(f) }

func (k kafkaPlace) Release() { k.p.Release() }

// kafkaAdmissionError is the Kafka listener's error for the QUIC
// admission's.
func kafkaAdmissionError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, quic.ErrConnLimit):
		return kafka.ErrConnLimit
	case errors.Is(err, quic.ErrTokenLimit):
		return kafka.ErrTokenLimit
	case errors.Is(err, quic.ErrEvicted):
		return kafka.ErrEvicted
	}
	return kafka.ErrShutdown
}

// sharedAdmission is the admission the node's Kafka listener shares.
func (n *Node) sharedAdmission() kafka.Admission { return kafkaAdmission{n.ln.Admission()} }
