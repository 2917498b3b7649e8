package wire

// Transforms (kinds 0x0080–0x0085, a range of their own after the uplinks).
// A transform reads a topic, calls a transform plugin on each batch with
// the state it answered last, and appends the outputs to another topic,
// exactly once (docs/PIPELINES.md). Every request needs the admin scope.
const (
	KindAddTransform    Kind = 0x0080 // add and start a transform
	KindListTransforms  Kind = 0x0081 // list transforms with per-partition status
	KindTransformStatus Kind = 0x0082 // one transform with per-partition status
	KindPauseTransform  Kind = 0x0083 // stop a transform until resumed (durably)
	KindResumeTransform Kind = 0x0084 // start a paused transform again
	KindRemoveTransform Kind = 0x0085 // stop and forget a transform and its group's progress
)

// TransformSpec is a transform's configuration.
//
//	name str16 | plugin str16 | from str16 | to str16 |
//	param count u32, (key str16, value str16)... | paused u8
type TransformSpec struct {
	Name   string
	Plugin string
	From   string
	To     string
	Params []FilterParam
	// Paused is set by the node in what it reports; an add ignores it.
	Paused bool
}

func (s *TransformSpec) put(w *fieldWriter) {
	w.str16(s.Name, MaxNameLen, "transform name")
	w.str16(s.Plugin, MaxNameLen, "plugin")
	w.str16(s.From, MaxNameLen, "from topic")
	w.str16(s.To, MaxNameLen, "to topic")
	if len(s.Params) > MaxFilterParams {
		w.fail(StatusInvalidArgument, "%d transform parameters exceed the limit of %d", len(s.Params), MaxFilterParams)
	}
	w.count(len(s.Params), "transform parameters")
	for i := range s.Params {
		w.str16(s.Params[i].Key, MaxNameLen, "parameter key")
		w.str16(s.Params[i].Value, MaxParamValueLen, "parameter value")
	}
	w.bool8(s.Paused)
}

func (s *TransformSpec) get(r *fieldReader) {
	r.str16(&s.Name, MaxNameLen, "transform name")
	r.str16(&s.Plugin, MaxNameLen, "plugin")
	r.str16(&s.From, MaxNameLen, "from topic")
	r.str16(&s.To, MaxNameLen, "to topic")
	n := r.count(4, "transform parameters")
	if n > MaxFilterParams {
		r.fail("%d transform parameters exceed the limit of %d", n, MaxFilterParams)
		n = 0
	}
	s.Params = resize(s.Params, n)
	for i := range s.Params {
		r.str16(&s.Params[i].Key, MaxNameLen, "parameter key")
		r.str16(&s.Params[i].Value, MaxParamValueLen, "parameter value")
	}
	s.Paused = r.bool8("paused")
}

// TransformPartitionStatus is a transform's progress on one input
// partition.
//
//	partition u32 | running u8 | committed u64 | high watermark u64 | lag u64 |
//	records in u64 | records out u64 | plugin failures u64 | errors u64 |
//	last error text | last error at (unix ns) i64
type TransformPartitionStatus struct {
	Partition uint32
	// Running: the node holds the partition for the transform now.
	Running bool
	// Committed is the input offset whose records' outputs are all in
	// the output topic; Lag the records from it to the high watermark.
	Committed     uint64
	HighWatermark uint64
	Lag           uint64
	// RecordsIn and RecordsOut count since the transform last started
	// on the node (a start of the node, a resume).
	RecordsIn, RecordsOut uint64
	// PluginFailures counts the plugin's failed calls, Errors every
	// failure of the partition's runner (the plugin's included).
	PluginFailures, Errors uint64
	// LastError is the latest failure (empty once a step commits again),
	// LastErrorAt when it happened, in unix nanoseconds (0: none).
	LastError   string
	LastErrorAt int64
}

const (
	transformPartitionStatusMin = 4 + 1 + 8*7 + 2 + 8
	// transformInfoMin: four empty names, no parameters, paused, an
	// empty error, no partitions.
	transformInfoMin = 4*2 + 4 + 1 + 2 + 4
)

func (s *TransformPartitionStatus) put(w *fieldWriter) {
	w.u32(s.Partition)
	w.bool8(s.Running)
	for _, v := range [...]uint64{s.Committed, s.HighWatermark, s.Lag, s.RecordsIn, s.RecordsOut, s.PluginFailures, s.Errors} {
		w.u64(v)
	}
	w.text(s.LastError)
	w.i64(s.LastErrorAt)
}

func (s *TransformPartitionStatus) get(r *fieldReader) {
	s.Partition = r.u32("partition")
	s.Running = r.bool8("running")
	for _, v := range [...]*uint64{&s.Committed, &s.HighWatermark, &s.Lag, &s.RecordsIn, &s.RecordsOut, &s.PluginFailures, &s.Errors} {
		*v = r.u64("transform counter")
	}
	r.str16(&s.LastError, MaxTextLen, "last error")
	s.LastErrorAt = r.i64("last error at")
}

// TransformInfo is a transform and its partitions.
//
//	spec | error text | partition count u32, partitions...
type TransformInfo struct {
	Spec TransformSpec
	// Error is why the transform does not run (its topics are gone, its
	// group refused it); empty while it runs.
	Error      string
	Partitions []TransformPartitionStatus
}

func (t *TransformInfo) put(w *fieldWriter) {
	t.Spec.put(w)
	w.text(t.Error)
	w.count(len(t.Partitions), "transform partitions")
	for i := range t.Partitions {
		t.Partitions[i].put(w)
	}
}

func (t *TransformInfo) get(r *fieldReader) {
	t.Spec.get(r)
	r.str16(&t.Error, MaxTextLen, "transform error")
	n := r.count(transformPartitionStatusMin, "transform partitions")
	t.Partitions = resize(t.Partitions, n)
	for i := range n {
		t.Partitions[i].get(r)
	}
}

// AddTransformRequest adds a transform and starts it at the input topic's
// first record. A transform of the same name must not exist.
//
//	spec
type AddTransformRequest struct{ Spec TransformSpec }

// Kind implements Message.
func (*AddTransformRequest) Kind() Kind { return KindAddTransform }

// Encode implements Message.
func (m *AddTransformRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "add-transform")
	m.Spec.put(&w)
	return w.result()
}

// Decode implements Message.
func (m *AddTransformRequest) Decode(b []byte) error {
	r := newFieldReader(b, "add-transform")
	m.Spec.get(&r)
	return r.finish()
}

// AddTransformReply is empty.
type AddTransformReply struct{}

// Kind implements Message.
func (*AddTransformReply) Kind() Kind { return KindAddTransform }

// Encode implements Message.
func (*AddTransformReply) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*AddTransformReply) Decode(b []byte) error {
	r := newFieldReader(b, "add-transform reply")
	return r.finish()
}

// ListTransformsRequest is empty.
type ListTransformsRequest struct{}

// Kind implements Message.
func (*ListTransformsRequest) Kind() Kind { return KindListTransforms }

// Encode implements Message.
func (*ListTransformsRequest) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*ListTransformsRequest) Decode(b []byte) error {
	r := newFieldReader(b, "list-transforms")
	return r.finish()
}

// ListTransformsReply lists the transforms by name.
//
//	count u32, transform info...
type ListTransformsReply struct{ Transforms []TransformInfo }

// Kind implements Message.
func (*ListTransformsReply) Kind() Kind { return KindListTransforms }

// Encode implements Message.
func (m *ListTransformsReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "list-transforms reply")
	w.count(len(m.Transforms), "transforms")
	for i := range m.Transforms {
		m.Transforms[i].put(&w)
	}
	return w.result()
}

// Decode implements Message.
func (m *ListTransformsReply) Decode(b []byte) error {
	r := newFieldReader(b, "list-transforms reply")
	n := r.count(transformInfoMin, "transforms")
	m.Transforms = resize(m.Transforms, n)
	for i := range n {
		m.Transforms[i].get(&r)
	}
	return r.finish()
}

// transformNameRequest is a request naming one transform.
//
//	name str16
type transformNameRequest struct{ Name string }

func (m *transformNameRequest) encode(dst []byte, what string) ([]byte, error) {
	w := newFieldWriter(dst, what)
	w.str16(m.Name, MaxNameLen, "transform name")
	return w.result()
}

func (m *transformNameRequest) decode(b []byte, what string) error {
	r := newFieldReader(b, what)
	r.str16(&m.Name, MaxNameLen, "transform name")
	return r.finish()
}

// emptyReply decodes an empty reply.
func emptyReply(b []byte, what string) error {
	r := newFieldReader(b, what)
	return r.finish()
}

// TransformStatusRequest asks for one transform.
//
//	name str16
type TransformStatusRequest struct{ Name string }

// Kind implements Message.
func (*TransformStatusRequest) Kind() Kind { return KindTransformStatus }

// Encode implements Message.
func (m *TransformStatusRequest) Encode(dst []byte) ([]byte, error) {
	return (*transformNameRequest)(m).encode(dst, "transform-status")
}

// Decode implements Message.
func (m *TransformStatusRequest) Decode(b []byte) error {
	return (*transformNameRequest)(m).decode(b, "transform-status")
}

// TransformStatusReply is the transform.
//
//	transform info
type TransformStatusReply struct{ Transform TransformInfo }

// Kind implements Message.
func (*TransformStatusReply) Kind() Kind { return KindTransformStatus }

// Encode implements Message.
func (m *TransformStatusReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "transform-status reply")
	m.Transform.put(&w)
	return w.result()
}

// Decode implements Message.
func (m *TransformStatusReply) Decode(b []byte) error {
	r := newFieldReader(b, "transform-status reply")
	m.Transform.get(&r)
	return r.finish()
}

// PauseTransformRequest stops a transform until it is resumed, across
// restarts too.
//
//	name str16
type PauseTransformRequest struct{ Name string }

// Kind implements Message.
func (*PauseTransformRequest) Kind() Kind { return KindPauseTransform }

// Encode implements Message.
func (m *PauseTransformRequest) Encode(dst []byte) ([]byte, error) {
	return (*transformNameRequest)(m).encode(dst, "pause-transform")
}

// Decode implements Message.
func (m *PauseTransformRequest) Decode(b []byte) error {
	return (*transformNameRequest)(m).decode(b, "pause-transform")
}

// PauseTransformReply is empty.
type PauseTransformReply struct{}

// Kind implements Message.
func (*PauseTransformReply) Kind() Kind { return KindPauseTransform }

// Encode implements Message.
func (*PauseTransformReply) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*PauseTransformReply) Decode(b []byte) error { return emptyReply(b, "pause-transform reply") }

// ResumeTransformRequest starts a paused transform where it stopped.
//
//	name str16
type ResumeTransformRequest struct{ Name string }

// Kind implements Message.
func (*ResumeTransformRequest) Kind() Kind { return KindResumeTransform }

// Encode implements Message.
func (m *ResumeTransformRequest) Encode(dst []byte) ([]byte, error) {
	return (*transformNameRequest)(m).encode(dst, "resume-transform")
}

// Decode implements Message.
func (m *ResumeTransformRequest) Decode(b []byte) error {
	return (*transformNameRequest)(m).decode(b, "resume-transform")
}

// ResumeTransformReply is empty.
type ResumeTransformReply struct{}

// Kind implements Message.
func (*ResumeTransformReply) Kind() Kind { return KindResumeTransform }

// Encode implements Message.
func (*ResumeTransformReply) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*ResumeTransformReply) Decode(b []byte) error { return emptyReply(b, "resume-transform reply") }

// RemoveTransformRequest stops and forgets a transform, and deletes its
// group's offsets and state. What it appended stays.
//
//	name str16
type RemoveTransformRequest struct{ Name string }

// Kind implements Message.
func (*RemoveTransformRequest) Kind() Kind { return KindRemoveTransform }

// Encode implements Message.
func (m *RemoveTransformRequest) Encode(dst []byte) ([]byte, error) {
	return (*transformNameRequest)(m).encode(dst, "remove-transform")
}

// Decode implements Message.
func (m *RemoveTransformRequest) Decode(b []byte) error {
	return (*transformNameRequest)(m).decode(b, "remove-transform")
}

// RemoveTransformReply is empty.
type RemoveTransformReply struct{}

// Kind implements Message.
func (*RemoveTransformReply) Kind() Kind { return KindRemoveTransform }

// Encode implements Message.
func (*RemoveTransformReply) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*RemoveTransformReply) Decode(b []byte) error { return emptyReply(b, "remove-transform reply") }
