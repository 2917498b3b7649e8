package sdk

// Partitioner picks a record's partition. A producer calls it from one
// goroutine at a time.
type Partitioner interface {
	// Partition returns the partition of rec among n partitions: a value in
	// [0, n). A value outside fails the record with ErrUnknownPartition.
	Partition(rec *Record, n int) int
}

// KeyHashPartitioner is the default partitioner. A record with a key goes
// to murmur2(key) mod n, the hash and arithmetic of the Kafka Java
// client's default partitioner (toPositive(murmur2(key)) % n), so keyed
// records land on the same partition numbers as in a Kafka topic with as
// many partitions — what forwarding a topic to Kafka wants. A record
// without a key (nil) goes to a "sticky" partition that moves round-robin
// every stickyRecords records (at least 1), so keyless records still fill
// batches; pass the producer's batch size.
func KeyHashPartitioner(stickyRecords int) Partitioner {
	return &keyHashPartitioner{every: max(stickyRecords, 1)}
}

type keyHashPartitioner struct {
	every  int
	sticky int
	count  int
}

func (p *keyHashPartitioner) Partition(rec *Record, n int) int {
	if rec.Key != nil {
		return int(murmur2(rec.Key)&0x7fffffff) % n
	}
	if p.count >= p.every {
		p.count = 0
		p.sticky++
	}
	p.count++
	p.sticky %= n
	return p.sticky
}

// ManualPartitioner sends each record to the partition it names in
// Record.Partition.
func ManualPartitioner() Partitioner { return manualPartitioner{} }

type manualPartitioner struct{}

func (manualPartitioner) Partition(rec *Record, _ int) int { return int(rec.Partition) }

// RoundRobinPartitioner spreads records over the partitions one by one,
// ignoring keys.
func RoundRobinPartitioner() Partitioner { return &roundRobinPartitioner{} }

type roundRobinPartitioner struct{ next int }

func (p *roundRobinPartitioner) Partition(_ *Record, n int) int {
	i := p.next % n
	p.next = i + 1
	return i
}

// murmur2 is the 32-bit MurmurHash2 with the seed and byte order of the
// Kafka Java client (org.apache.kafka.common.utils.Utils.murmur2).
func murmur2(data []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(data)
	h := seed ^ uint32(n)
	i := 0
	for ; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch n - i {
	case 3:
		h ^= uint32(data[i+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[i+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[i])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
