package sdk

import "github.com/ledgemq/ledge/transport/wire"

// KeyOption is an option of both kinds of consumer: a Consumer
// (NewConsumer) and a GroupConsumer (NewGroupConsumer).
type KeyOption interface {
	ConsumerOption
	GroupOption
}

type keyOption wire.PollKey

func (k keyOption) applyConsumer(c *consumerConfig) { c.key = wire.PollKey(k) }
func (k keyOption) applyGroup(c *groupConfig)       { c.key = wire.PollKey(k) }

// WithKey has every poll return only the records whose key is key: the
// commands of one device on a topic that all devices share, each device
// polling for its own key. The node parks such a poll by its key and
// wakes it only for a record of that key, so a device's poll costs the
// node the same however many devices share its partition. The position
// still moves past the records of other keys (committing a poll commits
// them too): a consumer never reads them again, and never skips one of
// its own. Records come in batches the node builds, with their offsets.
//
// Default: every record. An empty key means every record; a key is at
// most 1024 bytes. Records with a null key never match. A node that
// predates key polls refuses a keyed poll as a malformed request.
func WithKey(key []byte) KeyOption {
	if len(key) == 0 {
		return keyOption{}
	}
	return keyOption{Mode: wire.KeyExact, Key: append([]byte(nil), key...)}
}

// WithKeyPrefix is WithKey for every key that starts with prefix: the
// commands of a group of devices ("site-7/"), or of one device under
// several keys.
//
// Default: every record. An empty prefix means every record.
func WithKeyPrefix(prefix []byte) KeyOption {
	if len(prefix) == 0 {
		return keyOption{}
	}
	return keyOption{Mode: wire.KeyPrefix, Key: append([]byte(nil), prefix...)}
}
