package plugin

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/ledgemq/ledge/plugins/abi"
)

// Record is one record of a poll result. Its Key, Value and Header methods
// return subslices of the plugin's input, valid during the call.
type Record = abi.Record

// Bitmap is a filter's answer: Keep, Drop or Set each record by index.
// Records start dropped.
type Bitmap = abi.Bitmap

// Proposal is a commit policy's answer: the zero value commits nothing;
// CommitThrough commits through an offset of the batch.
type Proposal = abi.Proposal

// CommitThrough returns a proposal to commit through offset (the committed
// position becomes offset+1). The offset must lie within what the batch
// delivered, [Batch.From(), Batch.Next()); the host rejects anything else.
func CommitThrough(offset uint64) Proposal { return Proposal{Commit: true, Through: offset} }

// Batch is one poll result: the records a consumer would receive, in
// offset order.
type Batch struct {
	v abi.View
}

// Len returns the number of records.
func (b *Batch) Len() int { return b.v.Len() }

// Record returns record i, 0 <= i < Len().
func (b *Batch) Record(i int) Record { return b.v.Record(i) }

// From returns the position the poll read from.
func (b *Batch) From() uint64 { return b.v.From() }

// Next returns the position after this result, where the consumer
// continues whatever a filter keeps.
func (b *Batch) Next() uint64 { return b.v.Next() }

// Topic returns the topic name (aliasing the input).
func (b *Batch) Topic() []byte { return b.v.Topic() }

// Partition returns the partition.
func (b *Batch) Partition() int32 { return b.v.Partition() }

// RecordFilter decides for one record whether the consumer receives it.
type RecordFilter func(Record) bool

// BatchFilter decides for a whole batch: it keeps records in keep, where
// all start dropped. An error fails the poll.
type BatchFilter func(b *Batch, keep Bitmap) error

// CommitPolicy proposes a commit for a batch the consumer received. An
// error fails the poll.
type CommitPolicy func(b *Batch) (Proposal, error)

// registry is what the plugin registered; set from init functions.
var registry struct {
	recordFilter func(Params) (RecordFilter, error)
	batchFilter  func(Params) (BatchFilter, error)
	commitPolicy func(Params) (CommitPolicy, error)
	transform    func(Params) (Transform, error)
}

// RegisterRecordFilter registers the plugin's filter as a function of one
// record. setup runs once per instance with the consumer's parameters; an
// error it returns fails the poll with its message. A plugin registers at
// most one filter; a second registration panics.
func RegisterRecordFilter(setup func(Params) (RecordFilter, error)) {
	if registry.recordFilter != nil || registry.batchFilter != nil {
		panic("plugin: a filter is already registered")
	}
	registry.recordFilter = setup
}

// RegisterBatchFilter registers the plugin's filter as a function of the
// whole batch. See RegisterRecordFilter.
func RegisterBatchFilter(setup func(Params) (BatchFilter, error)) {
	if registry.recordFilter != nil || registry.batchFilter != nil {
		panic("plugin: a filter is already registered")
	}
	registry.batchFilter = setup
}

// RegisterCommitPolicy registers the plugin's commit policy. setup runs
// once per instance with the parameters; a plugin registers at most one
// policy (and may also register a filter).
func RegisterCommitPolicy(setup func(Params) (CommitPolicy, error)) {
	if registry.commitPolicy != nil {
		panic("plugin: a commit policy is already registered")
	}
	registry.commitPolicy = setup
}

// Params are the key=value parameters a consumer gave the plugin.
type Params struct {
	m map[string]string
}

// NewParams returns Params holding m (for tests of setup functions).
func NewParams(m map[string]string) Params { return Params{m: m} }

// Get returns the value of key and whether it was given.
func (p Params) Get(key string) (string, bool) {
	v, ok := p.m[key]
	return v, ok
}

// String returns the value of key, or def when it was not given.
func (p Params) String(key, def string) string {
	if v, ok := p.m[key]; ok {
		return v
	}
	return def
}

// Required returns the value of key, or an error naming it.
func (p Params) Required(key string) (string, error) {
	if v, ok := p.m[key]; ok {
		return v, nil
	}
	return "", fmt.Errorf("missing parameter %q", key)
}

// Int returns the value of key as an integer, or def when it was not given.
func (p Params) Int(key string, def int64) (int64, error) {
	v, ok := p.m[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parameter %q: %q is not an integer", key, v)
	}
	return n, nil
}

// Float returns the value of key as a number, or def when it was not given.
func (p Params) Float(key string, def float64) (float64, error) {
	v, ok := p.m[key]
	if !ok {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("parameter %q: %q is not a number", key, v)
	}
	return f, nil
}

// Bool returns the value of key as a boolean (strconv.ParseBool), or def
// when it was not given.
func (p Params) Bool(key string, def bool) (bool, error) {
	v, ok := p.m[key]
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("parameter %q: %q is not a boolean", key, v)
	}
	return b, nil
}

// Keys returns the parameter names, sorted.
func (p Params) Keys() []string {
	keys := make([]string, 0, len(p.m))
	for k := range p.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Only returns an error naming the first parameter not in known, so that
// a misspelt parameter fails loudly instead of being ignored.
func (p Params) Only(known ...string) error {
	for _, k := range p.Keys() {
		if !slices.Contains(known, k) {
			return fmt.Errorf("unknown parameter %q (known: %v)", k, known)
		}
	}
	return nil
}

// JSONField returns the raw JSON text of the member that path
// ("a" or "a.b") names in the JSON object doc, computed inside the plugin.
// A string's raw text includes its quotes; see JSONValueEquals.
// NativeJSONField does the same lookup in the host.
func JSONField(doc []byte, path string) ([]byte, bool) { return abi.JSONField(doc, path) }

// JSONValueEquals reports whether a raw JSON value equals want: a string's
// decoded text must equal want, any other value's raw text ("42", "true").
func JSONValueEquals(raw []byte, want string) bool { return abi.JSONValueEqualsString(raw, want) }

// Level is the severity of a log message.
type Level int32

// Log levels.
const (
	LevelDebug Level = abi.LevelDebug
	LevelInfo  Level = abi.LevelInfo
	LevelWarn  Level = abi.LevelWarn
	LevelError Level = abi.LevelError
)

// Logf logs a formatted message to the node's log, tagged with the
// plugin's name. The host bounds what one call may log.
func Logf(level Level, format string, args ...any) { Log(level, fmt.Sprintf(format, args...)) }
