package downlink

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/uplink"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrConfig: the downlink's configuration cannot work (no seeds, no
// Kafka topic, a TLS or SASL file that cannot be read, a Kafka topic that
// does not exist). Fix the configuration; retrying does not help, except
// for a Kafka topic that is created later.
var ErrConfig = errors.New("downlink: configuration")

// ErrNoDownlink: the topic has no downlink. Do not retry.
var ErrNoDownlink = errors.New("downlink: the topic has no downlink")

// TLS and SASL configure the connection to the Kafka brokers as an
// uplink's do: files are read when the downlink connects, and the SASL
// password is never stored in the node's metadata.
type (
	TLS  = uplink.TLS
	SASL = uplink.SASL
)

// Spec is a local topic's downlink as configured (`ledge downlink add`)
// and persisted in the node's metadata under the topic id: a re-created
// topic has no downlink until one is added again.
type Spec struct {
	Topic   string        `json:"topic"`
	TopicID fence.TopicID `json:"topic_id"`
	Seeds   []string      `json:"seeds"`
	// From is the Kafka topic read.
	From string `json:"from"`
	TLS  *TLS   `json:"tls,omitempty"`
	SASL *SASL  `json:"sasl,omitempty"`
}

// Validate checks what can be checked without Kafka.
func (s Spec) Validate() error {
	switch {
	case s.Topic == "":
		return fmt.Errorf("%w: no local topic", ErrConfig)
	case len(s.Seeds) == 0:
		return fmt.Errorf("%w: no Kafka seed brokers", ErrConfig)
	case s.From == "":
		return fmt.Errorf("%w: no Kafka topic to read", ErrConfig)
	}
	if err := uplink.CheckConnection(s.Seeds, s.SASL); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return nil
}

// KafkaOpts returns the client options for TLS and SASL, reading the
// files they name.
func (s Spec) KafkaOpts() ([]kgo.Opt, error) {
	opts, err := uplink.ClientOpts(s.TLS, s.SASL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return opts, nil
}

// ProducerName is the name under which the downlink of the local topic
// registers its idempotent producer for Kafka partition k. Every start
// initializes it again, which fences the earlier incarnations.
func ProducerName(topic fence.TopicID, from string, k int32) string {
	return "downlink/" + topic.String() + "/" + from + "/" + strconv.FormatInt(int64(k), 10)
}

var (
	keyDownlinks = []byte("downlinks/spec/")
	keyPositions = []byte("downlinks/pos/")
)

func specKey(id fence.TopicID) []byte {
	return append(append([]byte(nil), keyDownlinks...), id.String()...)
}

func positionKey(topic fence.TopicID, from string, k int32) []byte {
	return append(append([]byte(nil), keyPositions...), ProducerName(topic, from, k)...)
}

// SaveSpec persists spec and waits until it is durable.
func SaveSpec(ctx context.Context, meta owner.Metadata, spec Spec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	return owner.PutJSON(ctx, meta, specKey(spec.TopicID), spec)
}

// RemoveSpec forgets the downlink of a topic (an empty value: the
// metadata store has no delete). The positions stay in the local
// partitions and the checkpoints: adding the same downlink again resumes
// from them.
func RemoveSpec(ctx context.Context, meta owner.Metadata, id fence.TopicID) error {
	return owner.ForgetJSON(ctx, meta, specKey(id))
}

// LoadSpecs returns the persisted downlinks.
func LoadSpecs(meta owner.Metadata) ([]Spec, error) {
	return owner.ScanJSON[Spec](meta, keyDownlinks, "downlink")
}

// checkpoint is the next Kafka offset of partition k as last written
// after a durable append: every record below it is in the local topic.
// ok is false when none was written.
func loadCheckpoint(meta owner.Metadata, topic fence.TopicID, from string, k int32) (int64, bool, error) {
	v, ok, err := meta.Get(positionKey(topic, from, k))
	if err != nil || !ok || len(v) == 0 {
		return 0, false, err
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("downlink: checkpoint of %s partition %d: %d bytes, want 8", from, k, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), true, nil
}

func putCheckpoint(meta owner.Metadata, topic fence.TopicID, from string, k int32, next int64) (owner.Ticket, error) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(next))
	return meta.Put(positionKey(topic, from, k), b[:])
}
