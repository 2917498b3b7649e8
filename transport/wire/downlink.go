package wire

// Kafka downlinks (kinds 0x0090–0x0093, in the range 0x0090–0x009F of
// their own). A downlink appends a Kafka topic's records to a local topic
// exactly once (docs/PIPELINES.md, Downlink). Adding, listing, describing
// and removing downlinks needs the admin scope.
const (
	KindAddDownlink    Kind = 0x0090 // add (or replace) a topic's downlink
	KindListDownlinks  Kind = 0x0091 // list downlinks with their status
	KindDownlinkStatus Kind = 0x0092 // one topic's downlink with its status
	KindRemoveDownlink Kind = 0x0093 // stop and forget a topic's downlink
)

// DownlinkSpec is a topic's downlink configuration.
//
//	topic str16 | seed count u32, seeds str16... | from str16 |
//	tls u8 (0/1) | ca file str16 | cert file str16 | key file str16 | server name str16 |
//	sasl mechanism str16 ("" none) | sasl user str16 | sasl password file str16
type DownlinkSpec struct {
	Topic string
	Seeds []string
	// From is the Kafka topic read.
	From        string
	TLS         bool
	TLSCAFile   string
	TLSCertFile string
	TLSKeyFile  string
	TLSServer   string
	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty for
	// none. The password is read by the node from SASLPasswordFile.
	SASLMechanism    string
	SASLUser         string
	SASLPasswordFile string
}

func (s *DownlinkSpec) put(w *fieldWriter) {
	w.str16(s.Topic, MaxNameLen, "topic")
	w.count(len(s.Seeds), "seeds")
	for _, seed := range s.Seeds {
		w.str16(seed, MaxNameLen, "seed")
	}
	w.str16(s.From, MaxNameLen, "kafka topic")
	w.bool8(s.TLS)
	w.str16(s.TLSCAFile, MaxTextLen, "tls ca file")
	w.str16(s.TLSCertFile, MaxTextLen, "tls cert file")
	w.str16(s.TLSKeyFile, MaxTextLen, "tls key file")
	w.str16(s.TLSServer, MaxNameLen, "tls server name")
	w.str16(s.SASLMechanism, MaxNameLen, "sasl mechanism")
	w.str16(s.SASLUser, MaxNameLen, "sasl user")
	w.str16(s.SASLPasswordFile, MaxTextLen, "sasl password file")
}

func (s *DownlinkSpec) get(r *fieldReader) {
	r.str16(&s.Topic, MaxNameLen, "topic")
	n := r.count(2, "seeds")
	s.Seeds = resize(s.Seeds, n)
	for i := range n {
		r.str16(&s.Seeds[i], MaxNameLen, "seed")
	}
	r.str16(&s.From, MaxNameLen, "kafka topic")
	s.TLS = r.bool8("tls")
	r.str16(&s.TLSCAFile, MaxTextLen, "tls ca file")
	r.str16(&s.TLSCertFile, MaxTextLen, "tls cert file")
	r.str16(&s.TLSKeyFile, MaxTextLen, "tls key file")
	r.str16(&s.TLSServer, MaxNameLen, "tls server name")
	r.str16(&s.SASLMechanism, MaxNameLen, "sasl mechanism")
	r.str16(&s.SASLUser, MaxNameLen, "sasl user")
	r.str16(&s.SASLPasswordFile, MaxTextLen, "sasl password file")
}

// DownlinkPartitionStatus is one Kafka partition of a downlink.
//
//	kafka partition u32 | local partition u32 | producer id u64 | producer epoch u32 |
//	position i64 (-1 unknown) | kafka high watermark i64 (-1 unknown) | lag i64 |
//	records u64 | deleted u64
type DownlinkPartitionStatus struct {
	Partition     uint32
	Local         uint32
	Producer      uint64
	Epoch         uint32
	Position      int64
	HighWatermark int64
	Lag           int64
	Records       uint64
	// Deleted counts the records Kafka deleted before the downlink read
	// them.
	Deleted uint64
}

const downlinkPartitionStatusMin = 4 + 4 + 8 + 4 + 8*5

func (s *DownlinkPartitionStatus) put(w *fieldWriter) {
	w.u32(s.Partition)
	w.u32(s.Local)
	w.u64(s.Producer)
	w.u32(s.Epoch)
	w.i64(s.Position)
	w.i64(s.HighWatermark)
	w.i64(s.Lag)
	w.u64(s.Records)
	w.u64(s.Deleted)
}

func (s *DownlinkPartitionStatus) get(r *fieldReader) {
	s.Partition = r.u32("kafka partition")
	s.Local = r.u32("local partition")
	s.Producer = r.u64("producer id")
	s.Epoch = r.u32("producer epoch")
	s.Position = r.i64("position")
	s.HighWatermark = r.i64("kafka high watermark")
	s.Lag = r.i64("lag")
	s.Records = r.u64("records")
	s.Deleted = r.u64("deleted")
}

// DownlinkInfo is a downlink and its status.
//
//	spec | state u8 (0 connecting, 1 running, 2 backoff, 3 fenced, 4 stopped) |
//	connected u8 | records u64 | failures u64 | last error text | backoff ns u64 |
//	failing ns u64 | partition count u32, partitions...
type DownlinkInfo struct {
	Spec      DownlinkSpec
	State     uint8
	Connected bool
	Records   uint64
	Failures  uint64
	LastError string
	// BackoffNanos is the wait in progress after a failure; FailingNanos
	// how long attempts have been failing (0 while appends succeed).
	BackoffNanos uint64
	FailingNanos uint64
	Partitions   []DownlinkPartitionStatus
}

func (d *DownlinkInfo) put(w *fieldWriter) {
	d.Spec.put(w)
	w.enum(d.State, 4, "downlink state")
	w.bool8(d.Connected)
	w.u64(d.Records)
	w.u64(d.Failures)
	w.text(d.LastError)
	w.u64(d.BackoffNanos)
	w.u64(d.FailingNanos)
	w.count(len(d.Partitions), "downlink partitions")
	for i := range d.Partitions {
		d.Partitions[i].put(w)
	}
}

func (d *DownlinkInfo) get(r *fieldReader) {
	d.Spec.get(r)
	d.State = r.enum(4, "downlink state")
	d.Connected = r.bool8("connected")
	d.Records = r.u64("records")
	d.Failures = r.u64("failures")
	r.str16(&d.LastError, MaxTextLen, "last error")
	d.BackoffNanos = r.u64("backoff")
	d.FailingNanos = r.u64("failing")
	n := r.count(downlinkPartitionStatusMin, "downlink partitions")
	d.Partitions = resize(d.Partitions, n)
	for i := range n {
		d.Partitions[i].get(r)
	}
}

// AddDownlinkRequest adds a topic's downlink, replacing an existing one.
//
//	spec
type AddDownlinkRequest struct{ Spec DownlinkSpec }

// Kind implements Message.
func (*AddDownlinkRequest) Kind() Kind { return KindAddDownlink }

// Encode implements Message.
func (m *AddDownlinkRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "add-downlink")
	m.Spec.put(&w)
	return w.result()
}

// Decode implements Message.
func (m *AddDownlinkRequest) Decode(b []byte) error {
	r := newFieldReader(b, "add-downlink")
	m.Spec.get(&r)
	return r.finish()
}

// AddDownlinkReply is empty.
type AddDownlinkReply struct{}

// Kind implements Message.
func (*AddDownlinkReply) Kind() Kind { return KindAddDownlink }

// Encode implements Message.
func (*AddDownlinkReply) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*AddDownlinkReply) Decode(b []byte) error {
	r := newFieldReader(b, "add-downlink reply")
	return r.finish()
}

// ListDownlinksRequest is empty.
type ListDownlinksRequest struct{}

// Kind implements Message.
func (*ListDownlinksRequest) Kind() Kind { return KindListDownlinks }

// Encode implements Message.
func (*ListDownlinksRequest) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*ListDownlinksRequest) Decode(b []byte) error {
	r := newFieldReader(b, "list-downlinks")
	return r.finish()
}

// ListDownlinksReply lists the downlinks by topic.
//
//	count u32, downlink info...
type ListDownlinksReply struct{ Downlinks []DownlinkInfo }

// Kind implements Message.
func (*ListDownlinksReply) Kind() Kind { return KindListDownlinks }

// Encode implements Message.
func (m *ListDownlinksReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "list-downlinks reply")
	w.count(len(m.Downlinks), "downlinks")
	for i := range m.Downlinks {
		m.Downlinks[i].put(&w)
	}
	return w.result()
}

// Decode implements Message.
func (m *ListDownlinksReply) Decode(b []byte) error {
	r := newFieldReader(b, "list-downlinks reply")
	n := r.count(8, "downlinks")
	m.Downlinks = resize(m.Downlinks, n)
	for i := range n {
		m.Downlinks[i].get(&r)
	}
	return r.finish()
}

// DownlinkStatusRequest asks for one topic's downlink.
//
//	topic str16
type DownlinkStatusRequest struct{ Topic string }

// Kind implements Message.
func (*DownlinkStatusRequest) Kind() Kind { return KindDownlinkStatus }

// Encode implements Message.
func (m *DownlinkStatusRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "downlink-status")
	w.str16(m.Topic, MaxNameLen, "topic")
	return w.result()
}

// Decode implements Message.
func (m *DownlinkStatusRequest) Decode(b []byte) error {
	r := newFieldReader(b, "downlink-status")
	r.str16(&m.Topic, MaxNameLen, "topic")
	return r.finish()
}

// DownlinkStatusReply is the topic's downlink.
//
//	downlink info
type DownlinkStatusReply struct{ Downlink DownlinkInfo }

// Kind implements Message.
func (*DownlinkStatusReply) Kind() Kind { return KindDownlinkStatus }

// Encode implements Message.
func (m *DownlinkStatusReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "downlink-status reply")
	m.Downlink.put(&w)
	return w.result()
}

// Decode implements Message.
func (m *DownlinkStatusReply) Decode(b []byte) error {
	r := newFieldReader(b, "downlink-status reply")
	m.Downlink.get(&r)
	return r.finish()
}

// RemoveDownlinkRequest stops and forgets a topic's downlink. What it
// appended stays; adding the same downlink again resumes after it.
//
//	topic str16
type RemoveDownlinkRequest struct{ Topic string }

// Kind implements Message.
func (*RemoveDownlinkRequest) Kind() Kind { return KindRemoveDownlink }

// Encode implements Message.
func (m *RemoveDownlinkRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "remove-downlink")
	w.str16(m.Topic, MaxNameLen, "topic")
	return w.result()
}

// Decode implements Message.
func (m *RemoveDownlinkRequest) Decode(b []byte) error {
	r := newFieldReader(b, "remove-downlink")
	r.str16(&m.Topic, MaxNameLen, "topic")
	return r.finish()
}

// RemoveDownlinkReply is empty.
type RemoveDownlinkReply struct{}

// Kind implements Message.
func (*RemoveDownlinkReply) Kind() Kind { return KindRemoveDownlink }

// Encode implements Message.
func (*RemoveDownlinkReply) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*RemoveDownlinkReply) Decode(b []byte) error {
	r := newFieldReader(b, "remove-downlink reply")
	return r.finish()
}
