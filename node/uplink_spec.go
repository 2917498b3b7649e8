package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// UplinkSpec is a topic's uplink as configured (`ledge uplink add`) and
// persisted in the node's metadata under the topic id: a re-created topic
// has no uplink until one is added again.
type UplinkSpec struct {
	Topic        string             `json:"topic"`
	TopicID      fence.TopicID      `json:"topic_id"`
	Seeds        []string           `json:"seeds"`
	To           string             `json:"to"`
	Partitioning UplinkPartitioning `json:"partitioning"`
	Overflow     UplinkOverflow     `json:"overflow"`
	TLS          *UplinkTLS         `json:"tls,omitempty"`
	SASL         *UplinkSASL        `json:"sasl,omitempty"`
}

// UplinkTLS configures TLS to the Kafka brokers. Files are read when a
// forwarder connects, so certificates can be rotated without re-adding.
type UplinkTLS struct {
	CAFile     string `json:"ca_file,omitempty"`   // PEM; empty: the system pool
	CertFile   string `json:"cert_file,omitempty"` // client certificate (mutual TLS)
	KeyFile    string `json:"key_file,omitempty"`
	ServerName string `json:"server_name,omitempty"`
}

// UplinkSASL configures SASL. The password is not stored in the node's
// metadata: it is read from PasswordFile when a forwarder connects.
type UplinkSASL struct {
	Mechanism    string `json:"mechanism"` // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
	User         string `json:"user"`
	PasswordFile string `json:"password_file"`
}

// Validate checks what can be checked without Kafka.
func (s UplinkSpec) Validate() error {
	switch {
	case s.Topic == "":
		return fmt.Errorf("%w: no topic", ErrUplinkConfig)
	case len(s.Seeds) == 0:
		return fmt.Errorf("%w: no Kafka seed brokers", ErrUplinkConfig)
	case s.To == "":
		return fmt.Errorf("%w: no Kafka topic", ErrUplinkConfig)
	case s.Partitioning > UplinkByKey:
		return fmt.Errorf("%w: partitioning %d", ErrUplinkConfig, s.Partitioning)
	case s.Overflow > UplinkDropOldest:
		return fmt.Errorf("%w: overflow %d", ErrUplinkConfig, s.Overflow)
	}
	for _, seed := range s.Seeds {
		if _, _, err := net.SplitHostPort(seed); err != nil {
			return fmt.Errorf("%w: seed %q: %v", ErrUplinkConfig, seed, err)
		}
	}
	if s.SASL != nil {
		switch strings.ToUpper(s.SASL.Mechanism) {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		default:
			return fmt.Errorf("%w: SASL mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", ErrUplinkConfig, s.SASL.Mechanism)
		}
	}
	return nil
}

// KafkaOpts returns the client options for TLS and SASL, reading the
// files they name.
func (s UplinkSpec) KafkaOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if t := s.TLS; t != nil {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
		if t.CAFile != "" {
			pem, err := os.ReadFile(t.CAFile)
			if err != nil {
				return nil, fmt.Errorf("%w: TLS CA: %v", ErrUplinkConfig, err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%w: TLS CA %s: no certificate", ErrUplinkConfig, t.CAFile)
			}
		}
		if t.CertFile != "" || t.KeyFile != "" {
			cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("%w: TLS client certificate: %v", ErrUplinkConfig, err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if a := s.SASL; a != nil {
		pw, err := os.ReadFile(a.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("%w: SASL password: %v", ErrUplinkConfig, err)
		}
		pass := strings.TrimRight(string(pw), "\r\n")
		switch strings.ToUpper(a.Mechanism) {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: a.User, Pass: pass}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: a.User, Pass: pass}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: a.User, Pass: pass}.AsSha512Mechanism()))
		}
	}
	return opts, nil
}

var keyUplinks = []byte("uplinks/")

func uplinkKey(id fence.TopicID) []byte {
	return append(append([]byte(nil), keyUplinks...), id.String()...)
}

// SaveUplinkSpec persists spec and waits until it is durable.
func SaveUplinkSpec(ctx context.Context, meta owner.Metadata, spec UplinkSpec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	v, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	t, err := meta.Put(uplinkKey(spec.TopicID), v)
	if err != nil {
		return err
	}
	return meta.Sync(ctx, t)
}

// RemoveUplinkSpec forgets the uplink of a topic (an empty value: the
// metadata store has no delete) and waits until that is durable. The
// position committed in Kafka is left there: adding the uplink again
// resumes from it.
func RemoveUplinkSpec(ctx context.Context, meta owner.Metadata, id fence.TopicID) error {
	t, err := meta.Put(uplinkKey(id), nil)
	if err != nil {
		return err
	}
	return meta.Sync(ctx, t)
}

// LoadUplinkSpecs returns the persisted uplinks.
func LoadUplinkSpecs(meta owner.Metadata) ([]UplinkSpec, error) {
	var out []UplinkSpec
	err := meta.Scan(keyUplinks, func(k, v []byte) error {
		if len(v) == 0 {
			return nil
		}
		var s UplinkSpec
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("node: uplink %s: %w", k, err)
		}
		out = append(out, s)
		return nil
	})
	return out, err
}
