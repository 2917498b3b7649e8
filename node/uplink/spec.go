package uplink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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

// Spec is a topic's uplink as configured (`ledge uplink add`) and
// persisted in the node's metadata under the topic id: a re-created topic
// has no uplink until one is added again.
type Spec struct {
	Topic        string        `json:"topic"`
	TopicID      fence.TopicID `json:"topic_id"`
	Seeds        []string      `json:"seeds"`
	To           string        `json:"to"`
	Partitioning Partitioning  `json:"partitioning"`
	Overflow     Overflow      `json:"overflow"`
	TLS          *TLS          `json:"tls,omitempty"`
	SASL         *SASL         `json:"sasl,omitempty"`
}

// TLS configures TLS to the Kafka brokers. Files are read when a
// forwarder connects, so certificates can be rotated without re-adding.
type TLS struct {
	CAFile     string `json:"ca_file,omitempty"`   // PEM; empty: the system pool
	CertFile   string `json:"cert_file,omitempty"` // client certificate (mutual TLS)
	KeyFile    string `json:"key_file,omitempty"`
	ServerName string `json:"server_name,omitempty"`
}

// SASL configures SASL. The password is not stored in the node's
// metadata: it is read from PasswordFile when a forwarder connects.
type SASL struct {
	Mechanism    string `json:"mechanism"` // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
	User         string `json:"user"`
	PasswordFile string `json:"password_file"`
}

// Validate checks what can be checked without Kafka.
func (s Spec) Validate() error {
	switch {
	case s.Topic == "":
		return fmt.Errorf("%w: no topic", ErrConfig)
	case len(s.Seeds) == 0:
		return fmt.Errorf("%w: no Kafka seed brokers", ErrConfig)
	case s.To == "":
		return fmt.Errorf("%w: no Kafka topic", ErrConfig)
	case s.Partitioning > ByKey:
		return fmt.Errorf("%w: partitioning %d", ErrConfig, s.Partitioning)
	case s.Overflow > DropOldest:
		return fmt.Errorf("%w: overflow %d", ErrConfig, s.Overflow)
	}
	if err := CheckConnection(s.Seeds, s.SASL); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return nil
}

// CheckConnection checks the seed brokers and the SASL mechanism of a
// connection to Kafka (an uplink's or a downlink's), as far as that can
// be done without Kafka. Its error is the caller's to wrap.
func CheckConnection(seeds []string, sasl *SASL) error {
	for _, seed := range seeds {
		if _, _, err := net.SplitHostPort(seed); err != nil {
			return fmt.Errorf("seed %q: %v", seed, err)
		}
	}
	if sasl != nil {
		switch strings.ToUpper(sasl.Mechanism) {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		default:
			return fmt.Errorf("SASL mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", sasl.Mechanism)
		}
	}
	return nil
}

// KafkaOpts returns the client options for TLS and SASL, reading the
// files they name.
func (s Spec) KafkaOpts() ([]kgo.Opt, error) {
	opts, err := ClientOpts(s.TLS, s.SASL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return opts, nil
}

// ClientOpts returns the Kafka client options for a connection's TLS and
// SASL (an uplink's or a downlink's), reading the files they name. Its
// error is the caller's to wrap.
func ClientOpts(tlsCfg *TLS, sasl *SASL) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if t := tlsCfg; t != nil {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
		if t.CAFile != "" {
			pem, err := os.ReadFile(t.CAFile)
			if err != nil {
				return nil, fmt.Errorf("TLS CA: %v", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("TLS CA %s: no certificate", t.CAFile)
			}
		}
		if t.CertFile != "" || t.KeyFile != "" {
			cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("TLS client certificate: %v", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if a := sasl; a != nil {
		pw, err := os.ReadFile(a.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("SASL password: %v", err)
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

// SaveSpec persists spec and waits until it is durable.
func SaveSpec(ctx context.Context, meta owner.Metadata, spec Spec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	return owner.PutJSON(ctx, meta, uplinkKey(spec.TopicID), spec)
}

// RemoveSpec forgets the uplink of a topic (an empty value: the
// metadata store has no delete) and waits until that is durable. The
// position committed in Kafka is left there: adding the uplink again
// resumes from it.
func RemoveSpec(ctx context.Context, meta owner.Metadata, id fence.TopicID) error {
	return owner.ForgetJSON(ctx, meta, uplinkKey(id))
}

// LoadSpecs returns the persisted uplinks.
func LoadSpecs(meta owner.Metadata) ([]Spec, error) {
	return owner.ScanJSON[Spec](meta, keyUplinks, "uplink")
}
