package node

import (
	"crypto/tls"

	"github.com/ledgemq/ledge/node/kafka"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/node/session"
	"github.com/ledgemq/ledge/node/tokens"
)

// The Kafka listener's view of the node (package kafka): a session of
// node/session per authenticated connection, whose every method is the
// handler of the same request as a QUIC frame's, so a Kafka request goes
// through the same scope checks and the same partition owners as a QUIC
// one. It touches no QUIC type.

// listenKafka starts the Kafka listener on cfg.KafkaListen.
func (n *Node) listenKafka() error {
	var tcfg *tls.Config
	if n.cfg.KafkaTLS {
		tcfg = &tls.Config{GetCertificate: n.certs.GetCertificate, MinVersion: tls.VersionTLS12}
	}
	// The Kafka listener's connections take their places in the QUIC
	// listener's admission (sharedAdmission, server.go): the two listeners'
	// connections together stay under its caps.
	kcfg := kafka.Config{Listen: n.cfg.KafkaListen, TLS: tcfg, Backend: kafkaBackend{n}, Logger: n.log,
		Admission: n.sharedAdmission(), MaxRequestElements: n.cfg.KafkaMaxRequestElements}
	if pm, ok := n.cfg.Metrics.(*ops.PromMetrics); ok {
		m, err := kafka.RegisterMetrics(pm.Registry())
		if err != nil {
			return err
		}
		kcfg.Metrics = m
	}
	s, err := kafka.Listen(kcfg)
	if err != nil {
		return err
	}
	n.kafka = s
	n.log.Info("kafka listener started", "listen", s.Addr(), "tls", tcfg != nil)
	return nil
}

// KafkaAddr is the address of the Kafka listener ("" when there is none).
func (n *Node) KafkaAddr() string {
	if n.kafka == nil {
		return ""
	}
	return n.kafka.Addr()
}

// kafkaForget tells the Kafka listener that a topic (or a group) was
// deleted, so that it drops what it keeps about it.
func (n *Node) kafkaForget(topic, group string) {
	switch {
	case n.kafka == nil:
	case topic != "":
		n.kafka.TopicDeleted(topic)
	case group != "":
		n.kafka.GroupDeleted(group)
	}
}

// closeKafkaToken closes the Kafka connections authenticated with the
// token (revoked), and returns how many.
func (n *Node) closeKafkaToken(rec *tokens.Token) int {
	if n.kafka == nil {
		return 0
	}
	return n.kafka.CloseSessions(func(s kafka.Session) bool {
		ks, ok := s.(*session.Session)
		return ok && ks.Token().Info.ID == rec.Info.ID
	})
}

// kafkaBackend authenticates the Kafka listener's connections: a
// connection's session is a session of its token (node/session), which
// serves every request of the listener's Session interface.
type kafkaBackend struct{ n *Node }

var _ kafka.Session = (*session.Session)(nil)

func (b kafkaBackend) Authenticate(secret, host string) (kafka.Session, error) {
	rec, err := b.n.tokens.Authenticate(secret)
	if err != nil {
		return nil, err
	}
	return session.New((*sessionNode)(b.n), rec, host), nil
}

// ParkedPolls is how many long polls, QUIC polls and Kafka fetches alike,
// wait for records now.
func (n *Node) ParkedPolls() int { return len(n.parked) }
