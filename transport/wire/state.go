package wire

// Fenced state (kinds 0x0050–0x0051, docs/PROTOCOL.md §17). A consumer — a
// group, or a named consumer — keeps a keyed store per partition beside
// its committed offset. CommitWithState commits an offset and changes to
// the store in one fenced, atomic step; GetState reads the store together
// with the committed offset it corresponds to.

// Limits of state keys and values, as the node enforces them.
const (
	// MaxStateKeyLen is the largest state key.
	MaxStateKeyLen = 1 << 10
	// MaxStateValueLen is the largest state value.
	MaxStateValueLen = 1 << 20
)

// StateEntry is one key of a state store and its value.
//
//	key bytes16 | value bytes32
type StateEntry struct {
	Key   []byte
	Value []byte
}

const stateEntryMinSize = 2 + 4

// GetStateRequest reads a consumer's state store on one partition.
//
//	consumer | group str16 | topic str16 | partition u32 | key bytes16 |
//	prefix bytes16 | after bytes16 | max bytes u32
type GetStateRequest struct {
	// Consumer is a group member (it must hold the partition under the
	// epoch it states) or a named consumer (its current session). An
	// anonymous consumer with Group set is an administrator's read-only
	// inspection of that group's state (admin scope).
	Consumer Consumer
	Group    string
	Topic    string
	// Partition is the partition index.
	Partition uint32
	// Key, when not empty, selects that one key; otherwise every key
	// starting with Prefix.
	Key    []byte
	Prefix []byte
	// After continues a load: only keys above it (the last key of the
	// previous reply).
	After []byte
	// MaxBytes bounds the key and value bytes of the reply; 0 asks for the
	// node's default. At least one entry is returned when any is left.
	MaxBytes uint32
}

// Kind implements Message.
func (*GetStateRequest) Kind() Kind { return KindGetState }

// Encode implements Message.
func (m *GetStateRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "get-state")
	m.Consumer.put(&w)
	w.str16(m.Group, MaxNameLen, "group")
	w.str16(m.Topic, MaxNameLen, "topic")
	w.u32(m.Partition)
	w.bytes16(m.Key, MaxStateKeyLen, "key")
	w.bytes16(m.Prefix, MaxStateKeyLen, "prefix")
	w.bytes16(m.After, MaxStateKeyLen, "after")
	w.u32(m.MaxBytes)
	return w.result()
}

// Decode implements Message. Keys alias b.
func (m *GetStateRequest) Decode(b []byte) error {
	r := newFieldReader(b, "get-state")
	m.Consumer.get(&r)
	r.str16(&m.Group, MaxNameLen, "group")
	r.str16(&m.Topic, MaxNameLen, "topic")
	m.Partition = r.u32("partition")
	m.Key = r.bytes16(MaxStateKeyLen, "key")
	m.Prefix = r.bytes16(MaxStateKeyLen, "prefix")
	m.After = r.bytes16(MaxStateKeyLen, "after")
	m.MaxBytes = r.u32("max bytes")
	return r.finish()
}

// GetStateReply is the state and the committed offset it corresponds to,
// read in one step of the partition's owner.
//
//	state PartitionState | has committed bool | offset u64 | history u64 |
//	next u64 | moved bool | more bool | count u32 | state entry × count
type GetStateReply struct {
	// State is the partition's state (its History is the current history
	// epoch).
	State PartitionState
	// HasCommitted is false when the consumer never committed here (the
	// store is then empty).
	HasCommitted bool
	// Offset and History are the committed offset the entries belong to
	// and the history epoch it was committed in.
	Offset  uint64
	History uint64
	// Next is where to resume processing so that the state sees each
	// record once: the committed offset resolved in the current history,
	// or the start offset without one. Poll from it explicitly.
	Next uint64
	// Moved: a purge or a lossy recovery since the commit moved the
	// resume position; the state was derived from a history that is gone.
	Moved bool
	// More: entries were left out (MaxBytes); ask again with After set to
	// the last key.
	More    bool
	Entries []StateEntry
}

// Kind implements Message.
func (*GetStateReply) Kind() Kind { return KindGetState }

// Encode implements Message.
func (m *GetStateReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "get-state reply")
	m.State.put(&w)
	w.bool8(m.HasCommitted)
	w.u64(m.Offset)
	w.u64(m.History)
	w.u64(m.Next)
	w.bool8(m.Moved)
	w.bool8(m.More)
	w.count(len(m.Entries), "entries")
	for i := range m.Entries {
		w.bytes16(m.Entries[i].Key, MaxStateKeyLen, "key")
		w.bytes32(m.Entries[i].Value, MaxStateValueLen, "value")
	}
	return w.result()
}

// Decode implements Message. Keys and values alias b.
func (m *GetStateReply) Decode(b []byte) error {
	r := newFieldReader(b, "get-state reply")
	m.State.get(&r)
	m.HasCommitted = r.bool8("has committed")
	m.Offset = r.u64("offset")
	m.History = r.u64("history")
	m.Next = r.u64("next")
	m.Moved = r.bool8("moved")
	m.More = r.bool8("more")
	m.Entries = resize(m.Entries, r.count(stateEntryMinSize, "entries"))
	for i := range m.Entries {
		m.Entries[i].Key = r.bytes16(MaxStateKeyLen, "key")
		m.Entries[i].Value = r.bytes32(MaxStateValueLen, "value")
	}
	return r.finish()
}

// StateOp says what a state change does.
type StateOp uint8

// State operations.
const (
	// StatePut sets the key to the value.
	StatePut StateOp = 0
	// StateDelete removes the key (the value is empty).
	StateDelete StateOp = 1
	stateOpMax          = StateDelete
)

// StateChange is one change of a state store.
//
//	op u8 | key bytes16 | value bytes32
type StateChange struct {
	Op    StateOp
	Key   []byte
	Value []byte
}

const stateChangeMinSize = 1 + 2 + 4

// CommitWithStateRequest commits an offset and changes to the consumer's
// state store on one partition in one fenced, atomic step: checked like a
// Commit (the token of the poll the state derives from), and if refused
// nothing — neither the offset nor any change — is written.
//
//	consumer | topic str16 | partition u32 | offset u64 | token bytes16 |
//	count u32 | state change × count
type CommitWithStateRequest struct {
	Consumer  Consumer
	Topic     string
	Partition uint32
	// Offset is the position to resume from: one past the last record the
	// state includes.
	Offset uint64
	// Token is the fence token of the poll the offset derives from.
	Token []byte
	// Changes are applied in order; a later change of a key wins.
	Changes []StateChange
}

// Kind implements Message.
func (*CommitWithStateRequest) Kind() Kind { return KindCommitWithState }

// Encode implements Message.
func (m *CommitWithStateRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "commit-with-state")
	m.Consumer.put(&w)
	w.str16(m.Topic, MaxNameLen, "topic")
	w.u32(m.Partition)
	w.u64(m.Offset)
	w.bytes16(m.Token, MaxFenceTokenLen, "token")
	w.count(len(m.Changes), "changes")
	for i := range m.Changes {
		c := &m.Changes[i]
		w.enum(uint8(c.Op), uint8(stateOpMax), "op")
		w.bytes16(c.Key, MaxStateKeyLen, "key")
		w.bytes32(c.Value, MaxStateValueLen, "value")
	}
	return w.result()
}

// Decode implements Message. Tokens, keys and values alias b.
func (m *CommitWithStateRequest) Decode(b []byte) error {
	r := newFieldReader(b, "commit-with-state")
	m.Consumer.get(&r)
	r.str16(&m.Topic, MaxNameLen, "topic")
	m.Partition = r.u32("partition")
	m.Offset = r.u64("offset")
	m.Token = r.bytes16(MaxFenceTokenLen, "token")
	m.Changes = resize(m.Changes, r.count(stateChangeMinSize, "changes"))
	for i := range m.Changes {
		c := &m.Changes[i]
		c.Op = StateOp(r.enum(uint8(stateOpMax), "op"))
		c.Key = r.bytes16(MaxStateKeyLen, "key")
		c.Value = r.bytes32(MaxStateValueLen, "value")
	}
	return r.finish()
}

// CommitWithStateReply answers an accepted commit.
//
//	offset u64
type CommitWithStateReply struct {
	// Offset is the committed offset.
	Offset uint64
}

// Kind implements Message.
func (*CommitWithStateReply) Kind() Kind { return KindCommitWithState }

// Encode implements Message.
func (m *CommitWithStateReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "commit-with-state reply")
	w.u64(m.Offset)
	return w.result()
}

// Decode implements Message.
func (m *CommitWithStateReply) Decode(b []byte) error {
	r := newFieldReader(b, "commit-with-state reply")
	m.Offset = r.u64("offset")
	return r.finish()
}
