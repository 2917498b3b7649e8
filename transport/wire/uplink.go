package wire

// Kafka uplinks (kinds 0x0070–0x0073, a range of their own after plugins).
// An uplink forwards a topic's partitions to a Kafka topic exactly once
// (docs/FENCING.md, section 9). Adding, listing, describing and removing
// uplinks needs the admin scope.
const (
	KindAddUplink    Kind = 0x0070 // add (or replace) a topic's uplink
	KindListUplinks  Kind = 0x0071 // list uplinks with per-partition status
	KindUplinkStatus Kind = 0x0072 // one topic's uplink with per-partition status
	KindRemoveUplink Kind = 0x0073 // stop and forget a topic's uplink
)

// UplinkSpec is a topic's uplink configuration.
//
//	topic str16 | seed count u32, seeds str16... | to str16 |
//	partitioning u8 (0 same, 1 key) | overflow u8 (0 block, 1 drop-oldest) |
//	tls u8 (0/1) | ca file str16 | cert file str16 | key file str16 | server name str16 |
//	sasl mechanism str16 ("" none) | sasl user str16 | sasl password file str16
type UplinkSpec struct {
	Topic        string
	Seeds        []string
	To           string
	Partitioning uint8
	Overflow     uint8
	TLS          bool
	TLSCAFile    string
	TLSCertFile  string
	TLSKeyFile   string
	TLSServer    string
	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty for
	// none. The password is read by the node from SASLPasswordFile.
	SASLMechanism    string
	SASLUser         string
	SASLPasswordFile string
}

func (s *UplinkSpec) put(w *fieldWriter) {
	w.str16(s.Topic, MaxNameLen, "topic")
	w.count(len(s.Seeds), "seeds")
	for _, seed := range s.Seeds {
		w.str16(seed, MaxNameLen, "seed")
	}
	w.str16(s.To, MaxNameLen, "kafka topic")
	w.enum(s.Partitioning, 1, "partitioning")
	w.enum(s.Overflow, 1, "overflow")
	w.bool8(s.TLS)
	w.str16(s.TLSCAFile, MaxTextLen, "tls ca file")
	w.str16(s.TLSCertFile, MaxTextLen, "tls cert file")
	w.str16(s.TLSKeyFile, MaxTextLen, "tls key file")
	w.str16(s.TLSServer, MaxNameLen, "tls server name")
	w.str16(s.SASLMechanism, MaxNameLen, "sasl mechanism")
	w.str16(s.SASLUser, MaxNameLen, "sasl user")
	w.str16(s.SASLPasswordFile, MaxTextLen, "sasl password file")
}

func (s *UplinkSpec) get(r *fieldReader) {
	r.str16(&s.Topic, MaxNameLen, "topic")
	n := r.count(2, "seeds")
	s.Seeds = resize(s.Seeds, n)
	for i := range n {
		r.str16(&s.Seeds[i], MaxNameLen, "seed")
	}
	r.str16(&s.To, MaxNameLen, "kafka topic")
	s.Partitioning = r.enum(1, "partitioning")
	s.Overflow = r.enum(1, "overflow")
	s.TLS = r.bool8("tls")
	r.str16(&s.TLSCAFile, MaxTextLen, "tls ca file")
	r.str16(&s.TLSCertFile, MaxTextLen, "tls cert file")
	r.str16(&s.TLSKeyFile, MaxTextLen, "tls key file")
	r.str16(&s.TLSServer, MaxNameLen, "tls server name")
	r.str16(&s.SASLMechanism, MaxNameLen, "sasl mechanism")
	r.str16(&s.SASLUser, MaxNameLen, "sasl user")
	r.str16(&s.SASLPasswordFile, MaxTextLen, "sasl password file")
}

// UplinkPartitionStatus is one partition's forwarder.
//
//	partition u32 | state u8 (0 connecting, 1 forwarding, 2 backoff, 3 fenced, 4 stopped) |
//	position u64 | high watermark u64 | lag records u64 | lag age ns u64 |
//	forwarded u64 | dropped u64 | failures u64 | transactional id str16 | last error text |
//	transactions u64 | backoff ns u64 | failing ns u64 | held back u64
type UplinkPartitionStatus struct {
	Partition       uint32
	State           uint8
	Position        uint64
	HighWatermark   uint64
	LagRecords      uint64
	LagAgeNanos     uint64
	Forwarded       uint64
	Dropped         uint64
	Failures        uint64
	TransactionalID string
	LastError       string
	// Transactions counts the Kafka transactions committed.
	Transactions uint64
	// BackoffNanos is the wait in progress after a failure; FailingNanos
	// how long attempts have been failing (0 while forwarding works).
	BackoffNanos uint64
	FailingNanos uint64
	// HeldBack is the records retention kept at its latest run only
	// because they were not forwarded (overflow block).
	HeldBack uint64
}

const uplinkPartitionStatusMin = 4 + 1 + 8*7 + 2 + 2 + 8*4

func (s *UplinkPartitionStatus) put(w *fieldWriter) {
	w.u32(s.Partition)
	w.enum(s.State, 4, "uplink state")
	for _, v := range [...]uint64{s.Position, s.HighWatermark, s.LagRecords, s.LagAgeNanos, s.Forwarded, s.Dropped, s.Failures} {
		w.u64(v)
	}
	w.str16(s.TransactionalID, MaxTextLen, "transactional id")
	w.text(s.LastError)
	for _, v := range [...]uint64{s.Transactions, s.BackoffNanos, s.FailingNanos, s.HeldBack} {
		w.u64(v)
	}
}

func (s *UplinkPartitionStatus) get(r *fieldReader) {
	s.Partition = r.u32("partition")
	s.State = r.enum(4, "uplink state")
	for _, v := range [...]*uint64{&s.Position, &s.HighWatermark, &s.LagRecords, &s.LagAgeNanos, &s.Forwarded, &s.Dropped, &s.Failures} {
		*v = r.u64("uplink counter")
	}
	r.str16(&s.TransactionalID, MaxTextLen, "transactional id")
	r.str16(&s.LastError, MaxTextLen, "last error")
	for _, v := range [...]*uint64{&s.Transactions, &s.BackoffNanos, &s.FailingNanos, &s.HeldBack} {
		*v = r.u64("uplink counter")
	}
}

// UplinkInfo is an uplink and its partitions.
//
//	spec | partition count u32, partitions...
type UplinkInfo struct {
	Spec       UplinkSpec
	Partitions []UplinkPartitionStatus
}

func (u *UplinkInfo) put(w *fieldWriter) {
	u.Spec.put(w)
	w.count(len(u.Partitions), "uplink partitions")
	for i := range u.Partitions {
		u.Partitions[i].put(w)
	}
}

func (u *UplinkInfo) get(r *fieldReader) {
	u.Spec.get(r)
	n := r.count(uplinkPartitionStatusMin, "uplink partitions")
	u.Partitions = resize(u.Partitions, n)
	for i := range n {
		u.Partitions[i].get(r)
	}
}

// AddUplinkRequest adds a topic's uplink, replacing an existing one.
//
//	spec
type AddUplinkRequest struct{ Spec UplinkSpec }

// Kind implements Message.
func (*AddUplinkRequest) Kind() Kind { return KindAddUplink }

// Encode implements Message.
func (m *AddUplinkRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "add-uplink")
	m.Spec.put(&w)
	return w.result()
}

// Decode implements Message.
func (m *AddUplinkRequest) Decode(b []byte) error {
	r := newFieldReader(b, "add-uplink")
	m.Spec.get(&r)
	return r.finish()
}

// AddUplinkReply is empty.
type AddUplinkReply struct{}

// Kind implements Message.
func (*AddUplinkReply) Kind() Kind { return KindAddUplink }

// Encode implements Message.
func (*AddUplinkReply) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*AddUplinkReply) Decode(b []byte) error {
	r := newFieldReader(b, "add-uplink reply")
	return r.finish()
}

// ListUplinksRequest is empty.
type ListUplinksRequest struct{}

// Kind implements Message.
func (*ListUplinksRequest) Kind() Kind { return KindListUplinks }

// Encode implements Message.
func (*ListUplinksRequest) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*ListUplinksRequest) Decode(b []byte) error {
	r := newFieldReader(b, "list-uplinks")
	return r.finish()
}

// ListUplinksReply lists the uplinks by topic.
//
//	count u32, uplink info...
type ListUplinksReply struct{ Uplinks []UplinkInfo }

// Kind implements Message.
func (*ListUplinksReply) Kind() Kind { return KindListUplinks }

// Encode implements Message.
func (m *ListUplinksReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "list-uplinks reply")
	w.count(len(m.Uplinks), "uplinks")
	for i := range m.Uplinks {
		m.Uplinks[i].put(&w)
	}
	return w.result()
}

// Decode implements Message.
func (m *ListUplinksReply) Decode(b []byte) error {
	r := newFieldReader(b, "list-uplinks reply")
	n := r.count(8, "uplinks")
	m.Uplinks = resize(m.Uplinks, n)
	for i := range n {
		m.Uplinks[i].get(&r)
	}
	return r.finish()
}

// UplinkStatusRequest asks for one topic's uplink.
//
//	topic str16
type UplinkStatusRequest struct{ Topic string }

// Kind implements Message.
func (*UplinkStatusRequest) Kind() Kind { return KindUplinkStatus }

// Encode implements Message.
func (m *UplinkStatusRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "uplink-status")
	w.str16(m.Topic, MaxNameLen, "topic")
	return w.result()
}

// Decode implements Message.
func (m *UplinkStatusRequest) Decode(b []byte) error {
	r := newFieldReader(b, "uplink-status")
	r.str16(&m.Topic, MaxNameLen, "topic")
	return r.finish()
}

// UplinkStatusReply is the topic's uplink.
//
//	uplink info
type UplinkStatusReply struct{ Uplink UplinkInfo }

// Kind implements Message.
func (*UplinkStatusReply) Kind() Kind { return KindUplinkStatus }

// Encode implements Message.
func (m *UplinkStatusReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "uplink-status reply")
	m.Uplink.put(&w)
	return w.result()
}

// Decode implements Message.
func (m *UplinkStatusReply) Decode(b []byte) error {
	r := newFieldReader(b, "uplink-status reply")
	m.Uplink.get(&r)
	return r.finish()
}

// RemoveUplinkRequest stops and forgets a topic's uplink. The position
// committed in Kafka stays: adding the uplink again resumes from it.
//
//	topic str16
type RemoveUplinkRequest struct{ Topic string }

// Kind implements Message.
func (*RemoveUplinkRequest) Kind() Kind { return KindRemoveUplink }

// Encode implements Message.
func (m *RemoveUplinkRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "remove-uplink")
	w.str16(m.Topic, MaxNameLen, "topic")
	return w.result()
}

// Decode implements Message.
func (m *RemoveUplinkRequest) Decode(b []byte) error {
	r := newFieldReader(b, "remove-uplink")
	r.str16(&m.Topic, MaxNameLen, "topic")
	return r.finish()
}

// RemoveUplinkReply is empty.
type RemoveUplinkReply struct{}

// Kind implements Message.
func (*RemoveUplinkReply) Kind() Kind { return KindRemoveUplink }

// Encode implements Message.
func (*RemoveUplinkReply) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*RemoveUplinkReply) Decode(b []byte) error {
	r := newFieldReader(b, "remove-uplink reply")
	return r.finish()
}
