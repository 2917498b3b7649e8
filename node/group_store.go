package node

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// What the coordinator keeps in metadata, per group, under
// "groups/<name>" (the engine seals every value with its magic, version
// and CRC):
//
//	version u8 (1) | assignor u8 | reserved epoch u64 | topics u32 |
//	(len u16 | name | topic id [16]) × topics
//
// The reserved epoch is a ceiling: every group epoch handed out is at
// most the ceiling that was durable when it was handed out, and after a
// restart the group continues above it. Committed offsets are not here:
// they are the owners' bookmarks of the group on each partition, stamped
// with the history epoch they were committed in, under the topic's id.
// The subscription is stamped with the id of each topic's creation it was
// written under (zero for a topic that did not exist). Members are not
// kept: they join again after a restart.

var keyGroups = []byte("groups/")

const groupRecordVersion = 1

type groupRecord struct {
	assignor wire.GroupAssignor
	reserved fence.MemberEpoch
	topics   []string
	ids      []fence.TopicID // of topics, by index
}

func groupKey(name string) []byte { return append(append([]byte(nil), keyGroups...), name...) }

func (r groupRecord) encode() []byte {
	b := []byte{groupRecordVersion, byte(r.assignor)}
	b = binary.LittleEndian.AppendUint64(b, uint64(r.reserved))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.topics)))
	for i, t := range r.topics {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(t)))
		b = append(b, t...)
		var id fence.TopicID
		if i < len(r.ids) {
			id = r.ids[i]
		}
		b = append(b, id[:]...)
	}
	return b
}

var errGroupRecord = errors.New("node: corrupt group record")

func decodeGroupRecord(b []byte) (groupRecord, error) {
	var r groupRecord
	if len(b) < 14 {
		return r, fmt.Errorf("%w: %d bytes", errGroupRecord, len(b))
	}
	if b[0] != groupRecordVersion {
		return r, fmt.Errorf("%w: version %d is not one this node reads", errGroupRecord, b[0])
	}
	if b[1] > byte(wire.AssignorRoundRobin) {
		return r, fmt.Errorf("%w: assignor %d", errGroupRecord, b[1])
	}
	r.assignor = wire.GroupAssignor(b[1])
	r.reserved = fence.MemberEpoch(binary.LittleEndian.Uint64(b[2:]))
	n := binary.LittleEndian.Uint32(b[10:])
	rest := b[14:]
	if uint64(n)*(2+16) > uint64(len(rest)) {
		return r, fmt.Errorf("%w: %d topics in %d bytes", errGroupRecord, n, len(rest))
	}
	for range n {
		if len(rest) < 2 {
			return r, fmt.Errorf("%w: truncated topic", errGroupRecord)
		}
		l := int(binary.LittleEndian.Uint16(rest))
		if len(rest) < 2+l+16 {
			return r, fmt.Errorf("%w: truncated topic", errGroupRecord)
		}
		r.topics = append(r.topics, string(rest[2:2+l]))
		r.ids = append(r.ids, fence.TopicID(rest[2+l:2+l+16]))
		rest = rest[2+l+16:]
	}
	if len(rest) != 0 {
		return r, fmt.Errorf("%w: %d trailing bytes", errGroupRecord, len(rest))
	}
	return r, nil
}

// putGroupRecord orders the write of a group's record.
func putGroupRecord(meta Metadata, name string, r groupRecord) (Ticket, error) {
	return meta.Put(groupKey(name), r.encode())
}

// loadGroupRecords calls fn for every stored group.
func loadGroupRecords(meta Metadata, fn func(name string, r groupRecord)) error {
	return meta.Scan(keyGroups, func(k, v []byte) error {
		name := string(k[len(keyGroups):])
		r, err := decodeGroupRecord(v)
		if err != nil {
			return fmt.Errorf("group %q: %w", name, err)
		}
		fn(name, r)
		return nil
	})
}
