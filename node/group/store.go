package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// What the coordinator keeps in metadata, per group, under
// "groups/<name>" (the engine seals every value with its magic, version
// and CRC):
//
//	version u8 (2) | assignor u8 | reserved epoch u64 | topics u32 |
//	(len u16 | name | topic id [16]) × topics |
//	flags u8 (bit 0: deleted) | policy len u16 | policy |
//	params u16 | (key len u16 | key | value len u16 | value) × params
//
// Version 1 records end after the topics (no flags, no policy); they are
// read as such and written as version 2 at the next change.
//
// The policy is the commit policy plugin attached to the group (empty:
// none) with its parameters, sorted by key. A deleted group leaves a
// tombstone: the deleted flag and its reservation ceiling, no topics and
// no policy, so that a group created again under the name continues
// above every epoch of the deleted one.
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

const (
	groupRecordVersion   = 2
	groupRecordVersionV1 = 1
	groupFlagDeleted     = 1 << 0
)

type groupRecord struct {
	assignor wire.GroupAssignor
	reserved fence.MemberEpoch
	topics   []string
	ids      []fence.TopicID // of topics, by index
	deleted  bool
	// policy is the group's commit policy; Plugin "" for none.
	policy PolicyRecord
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
	var flags byte
	if r.deleted {
		flags |= groupFlagDeleted
	}
	b = append(b, flags)
	b = appendString16(b, r.policy.Plugin)
	keys := slices.Sorted(maps.Keys(r.policy.Params))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(keys)))
	for _, k := range keys {
		b = appendString16(b, k)
		b = appendString16(b, r.policy.Params[k])
	}
	return b
}

func appendString16(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// readString16 reads a u16-length-prefixed string from b.
func readString16(b []byte, what string) (string, []byte, error) {
	if len(b) < 2 {
		return "", nil, fmt.Errorf("%w: truncated %s", errGroupRecord, what)
	}
	l := int(binary.LittleEndian.Uint16(b))
	if len(b) < 2+l {
		return "", nil, fmt.Errorf("%w: truncated %s", errGroupRecord, what)
	}
	return string(b[2 : 2+l]), b[2+l:], nil
}

var errGroupRecord = errors.New("group: corrupt group record")

func decodeGroupRecord(b []byte) (groupRecord, error) {
	var r groupRecord
	if len(b) < 14 {
		return r, fmt.Errorf("%w: %d bytes", errGroupRecord, len(b))
	}
	if b[0] != groupRecordVersion && b[0] != groupRecordVersionV1 {
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
	if b[0] == groupRecordVersion {
		var err error
		if rest, err = r.decodeTail(rest); err != nil {
			return r, err
		}
	}
	if len(rest) != 0 {
		return r, fmt.Errorf("%w: %d trailing bytes", errGroupRecord, len(rest))
	}
	return r, nil
}

// decodeTail reads what version 2 adds after the topics: the flags and
// the policy.
func (r *groupRecord) decodeTail(rest []byte) ([]byte, error) {
	if len(rest) < 1 {
		return nil, fmt.Errorf("%w: no flags", errGroupRecord)
	}
	flags := rest[0]
	if flags&^groupFlagDeleted != 0 {
		return nil, fmt.Errorf("%w: unknown flags %#x", errGroupRecord, flags)
	}
	r.deleted = flags&groupFlagDeleted != 0
	var err error
	if r.policy.Plugin, rest, err = readString16(rest[1:], "policy"); err != nil {
		return nil, err
	}
	if len(rest) < 2 {
		return nil, fmt.Errorf("%w: truncated policy parameters", errGroupRecord)
	}
	n := int(binary.LittleEndian.Uint16(rest))
	rest = rest[2:]
	if n*4 > len(rest) {
		return nil, fmt.Errorf("%w: %d policy parameters in %d bytes", errGroupRecord, n, len(rest))
	}
	for range n {
		var k, v string
		if k, rest, err = readString16(rest, "policy parameter"); err != nil {
			return nil, err
		}
		if v, rest, err = readString16(rest, "policy parameter"); err != nil {
			return nil, err
		}
		if r.policy.Params == nil {
			r.policy.Params = map[string]string{}
		}
		r.policy.Params[k] = v
	}
	if r.policy.Plugin != "" {
		r.policy.V = RecordVersion
	} else if len(r.policy.Params) > 0 {
		return nil, fmt.Errorf("%w: policy parameters without a policy", errGroupRecord)
	}
	return rest, nil
}

// putGroupRecord orders the write of a group's record.
func putGroupRecord(meta owner.Metadata, name string, r groupRecord) (owner.Ticket, error) {
	return meta.Put(groupKey(name), r.encode())
}

// loadGroupRecords calls fn for every stored group.
func loadGroupRecords(meta owner.Metadata, fn func(name string, r groupRecord)) error {
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
