package wire_test

import (
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
	"pgregory.net/rapid"
)

func genStateEntry(t *rapid.T) wire.StateEntry {
	return wire.StateEntry{Key: genBytes(t, 40, "key"), Value: genBytes(t, 200, "value")}
}

func genStateChange(t *rapid.T) wire.StateChange {
	c := wire.StateChange{Op: wire.StateOp(rapid.Uint8Range(0, 1).Draw(t, "op")), Key: genBytes(t, 40, "key")}
	if c.Op == wire.StatePut {
		c.Value = genBytes(t, 200, "value")
	}
	return c
}

// stateMessageCases lists every fenced-state message.
func stateMessageCases() []messageCase {
	return []messageCase{
		{"GetStateRequest", custom(func(t *rapid.T) *wire.GetStateRequest {
			return &wire.GetStateRequest{
				Consumer: genConsumer(t), Group: genName(t, "group"), Topic: genName(t, "topic"),
				Partition: genPartitionIndex(t), Key: genBytes(t, 40, "key"), Prefix: genBytes(t, 40, "prefix"),
				After: genBytes(t, 40, "after"), MaxBytes: rapid.Uint32().Draw(t, "max bytes"),
			}
		}), zeroOf[wire.GetStateRequest]()},
		{"GetStateReply", custom(func(t *rapid.T) *wire.GetStateReply {
			return &wire.GetStateReply{
				State: genPartitionState(t), HasCommitted: rapid.Bool().Draw(t, "has committed"),
				Offset: rapid.Uint64().Draw(t, "offset"), History: rapid.Uint64().Draw(t, "history"),
				Next: rapid.Uint64().Draw(t, "next"), Moved: rapid.Bool().Draw(t, "moved"),
				More: rapid.Bool().Draw(t, "more"), Entries: genSlice(t, 4, "entries", genStateEntry),
			}
		}), zeroOf[wire.GetStateReply]()},
		{"CommitWithStateRequest", custom(func(t *rapid.T) *wire.CommitWithStateRequest {
			return &wire.CommitWithStateRequest{
				Consumer: genConsumer(t), Topic: genName(t, "topic"), Partition: genPartitionIndex(t),
				Offset: rapid.Uint64().Draw(t, "offset"), Token: genToken(t),
				Changes: genSlice(t, 4, "changes", genStateChange),
			}
		}), zeroOf[wire.CommitWithStateRequest]()},
		{"CommitWithStateReply", custom(func(t *rapid.T) *wire.CommitWithStateReply {
			return &wire.CommitWithStateReply{Offset: rapid.Uint64().Draw(t, "offset")}
		}), zeroOf[wire.CommitWithStateReply]()},
	}
}

func FuzzDecodeGetStateRequest(f *testing.F)        { fuzzDecoder(f, "GetStateRequest") }
func FuzzDecodeGetStateReply(f *testing.F)          { fuzzDecoder(f, "GetStateReply") }
func FuzzDecodeCommitWithStateRequest(f *testing.F) { fuzzDecoder(f, "CommitWithStateRequest") }
