package kafka

import (
	"encoding/binary"
	"errors"
	"reflect"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Decoding a request with kmsg allocates its arrays from the counts the
// request claims, checked only against a few bytes an element: a topic
// array claiming a million entries takes 64 MiB of structs from 2 MiB of
// request. So before kmsg sees a request, a walk over its bytes checks
// that every array's elements are there, and charges what decoding them
// and answering them will allocate against a budget proportional to the
// request's size (costBudget): allocation follows the bytes received.
//
// Produce, Fetch and OffsetCommit, the requests whose size grows with
// the records or partitions they carry, are walked; every other request
// is small (at most MaxControlRequestBytes), so kmsg's own check bounds
// it.
//
// Once decoded, a request's elements (its topics, partitions, groups,
// at every depth) are counted: answering one costs the node up to
// about 2 KiB (measured with FuzzKafkaRequest: a Fetch partition
// 2.1 KB, a Metadata topic 1.2 KB, a DescribeGroups group 1.2 KB), whatever
// few bytes it took in the request, so a request carries at most
// MaxRequestElements of them.
// errOverBudget refuses a request whose decoded form would take more
// than its budget.
var errOverBudget = errors.New("kafka: request claims more elements than its bytes carry")

// costBudget is what a walked request of n bytes may allocate for its
// arrays' elements (those of its decoding and of its response): with the
// request itself and the strings copied out of it, a request's heap stays
// under 2n + 1 MiB.
func costBudget(n int) int { return 768<<10 + n/2 }

// tagCost is what one unknown tagged field costs kmsg: an entry in a map.
const tagCost = 64

// walker reads a request's fields without decoding them.
type walker struct {
	b      []byte
	flex   bool
	budget int
	err    error
}

func (w *walker) fail(err error) {
	if w.err == nil {
		w.err = err
	}
	w.b = nil
}

func (w *walker) skip(n int) {
	if n < 0 || n > len(w.b) {
		w.fail(errTruncated)
		return
	}
	w.b = w.b[n:]
}

var errTruncated = errors.New("kafka: request truncated")

func (w *walker) uvarint() uint64 {
	v, k := binary.Uvarint(w.b)
	if k <= 0 {
		w.fail(errTruncated)
		return 0
	}
	w.b = w.b[k:]
	return v
}

// length reads a string's, bytes' or array's length: a compact one
// (uvarint, plus one) when flexible, else of size bytes (2 or 4). -1 is
// null.
func (w *walker) length(size int) int {
	if w.flex {
		v := w.uvarint()
		if v > uint64(len(w.b))+1 {
			w.fail(errTruncated)
			return 0
		}
		return int(v) - 1
	}
	if len(w.b) < size {
		w.fail(errTruncated)
		return 0
	}
	var v int
	if size == 2 {
		v = int(int16(binary.BigEndian.Uint16(w.b)))
	} else {
		v = int(int32(binary.BigEndian.Uint32(w.b)))
	}
	w.b = w.b[size:]
	return v
}

func (w *walker) str()   { w.skip(max(w.length(2), 0)) }
func (w *walker) bytes() { w.skip(max(w.length(4), 0)) }

// array walks an array whose elements each cost cost bytes once decoded
// and answered, elem walking one.
func (w *walker) array(cost int, elem func()) {
	n := w.length(4)
	if n <= 0 || w.err != nil {
		return
	}
	if n > len(w.b) || n*cost > w.budget {
		w.fail(errOverBudget)
		return
	}
	w.budget -= n * cost
	for range n {
		if w.err != nil {
			return
		}
		elem()
	}
}

// tags walks a flexible version's tagged fields.
func (w *walker) tags() {
	if !w.flex {
		return
	}
	n := w.uvarint()
	if n > uint64(len(w.b)) || int(n)*tagCost > w.budget {
		w.fail(errOverBudget)
		return
	}
	w.budget -= int(n) * tagCost
	for range n {
		w.uvarint()
		w.skip(int(min(w.uvarint(), uint64(len(w.b))+1)))
	}
}

func sizeOf[T any]() int {
	var v T
	return int(unsafe.Sizeof(v))
}

// Costs of the walked requests' array elements: the request's struct and
// the response's.
var (
	produceTopicCost     = sizeOf[kmsg.ProduceRequestTopic]() + sizeOf[kmsg.ProduceResponseTopic]()
	producePartitionCost = sizeOf[kmsg.ProduceRequestTopicPartition]() + sizeOf[kmsg.ProduceResponseTopicPartition]()
	fetchTopicCost       = sizeOf[kmsg.FetchRequestTopic]() + sizeOf[kmsg.FetchResponseTopic]()
	fetchPartitionCost   = sizeOf[kmsg.FetchRequestTopicPartition]() + sizeOf[kmsg.FetchResponseTopicPartition]()
	forgottenTopicCost   = sizeOf[kmsg.FetchRequestForgottenTopic]()
	commitTopicCost      = sizeOf[kmsg.OffsetCommitRequestTopic]() + sizeOf[kmsg.OffsetCommitResponseTopic]()
	commitPartitionCost  = sizeOf[kmsg.OffsetCommitRequestTopicPartition]() + sizeOf[kmsg.OffsetCommitResponseTopicPartition]()
)

// walked reports whether requests of API key are walked (checkClaims),
// and so may be as large as MaxRequestBytes.
func walked(key int16) bool {
	switch key {
	case kmsg.Produce.Int16(), kmsg.Fetch.Int16(), kmsg.OffsetCommit.Int16():
		return true
	}
	return false
}

// checkClaims walks the body of a request of API key at version (after
// its header) when it is one of the walked requests, and says whether
// decoding it stays within the budget of a request of n bytes.
func checkClaims(key, version int16, flex bool, body []byte, n int) error {
	w := &walker{b: body, flex: flex, budget: costBudget(n)}
	switch key {
	case kmsg.Produce.Int16():
		w.produce(version)
	case kmsg.Fetch.Int16():
		w.fetch(version)
	case kmsg.OffsetCommit.Int16():
		w.offsetCommit(version)
	default:
		return nil
	}
	return w.err
}

// produce walks a Produce request, versions 3 to 9.
func (w *walker) produce(_ int16) {
	w.str() // transactional id
	w.skip(2 + 4)
	w.array(produceTopicCost, func() {
		w.str()
		w.array(producePartitionCost, func() {
			w.skip(4)
			w.bytes()
			w.tags()
		})
		w.tags()
	})
	w.tags()
}

// fetch walks a Fetch request, versions 4 to 12.
func (w *walker) fetch(v int16) {
	w.skip(4 + 4 + 4 + 4 + 1) // replica, max wait, min bytes, max bytes, isolation
	if v >= 7 {
		w.skip(4 + 4) // session id and epoch
	}
	partition := 4 + 8 + 4 // partition, fetch offset, partition max bytes
	if v >= 9 {
		partition += 4 // current leader epoch
	}
	if v >= 12 {
		partition += 4 // last fetched epoch
	}
	if v >= 5 {
		partition += 8 // log start offset
	}
	w.array(fetchTopicCost, func() {
		w.str()
		w.array(fetchPartitionCost, func() {
			w.skip(partition)
			w.tags()
		})
		w.tags()
	})
	if v >= 7 {
		w.array(forgottenTopicCost, func() {
			w.str()
			w.array(4, func() { w.skip(4) })
			w.tags()
		})
	}
	if v >= 11 {
		w.str() // rack
	}
	w.tags()
}

// offsetCommit walks an OffsetCommit request, versions 2 to 8: a
// consumer of many partitions commits them all at once (50 bytes a
// partition from franz-go), past what a control request may carry.
func (w *walker) offsetCommit(v int16) {
	w.str()   // group
	w.skip(4) // generation
	w.str()   // member id
	if v >= 7 {
		w.str() // group instance id
	}
	if v <= 4 {
		w.skip(8) // retention
	}
	partition := 4 + 8 // partition, offset
	if v >= 6 {
		partition += 4 // leader epoch
	}
	w.array(commitTopicCost, func() {
		w.str()
		w.array(commitPartitionCost, func() {
			w.skip(partition)
			w.str() // metadata
			w.tags()
		})
		w.tags()
	})
	w.tags()
}

// countElements counts the elements of the slices v holds, at every
// depth, bytes and strings aside.
func countElements(v reflect.Value) int {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return 0
		}
		return countElements(v.Elem())
	case reflect.Struct:
		n := 0
		for i := range v.NumField() {
			n += countElements(v.Field(i))
		}
		return n
	case reflect.Slice:
		switch v.Type().Elem().Kind() {
		case reflect.Uint8:
			return 0
		case reflect.Struct, reflect.Slice, reflect.Pointer:
			n := v.Len()
			for i := range v.Len() {
				n += countElements(v.Index(i))
			}
			return n
		}
		return v.Len()
	}
	return 0
}
