package sdk

import "testing"

// TestMurmur2KafkaVectors pins the hash to the Kafka Java client's
// (UtilsTest.testMurmur2), so keyed records land on Kafka's partitions.
func TestMurmur2KafkaVectors(t *testing.T) {
	for _, c := range []struct {
		key  string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	} {
		if got := int32(murmur2([]byte(c.key))); got != c.want {
			t.Errorf("murmur2(%q) = %d, want %d", c.key, got, c.want)
		}
	}
}

func TestKeyHashPartitioner(t *testing.T) {
	p := KeyHashPartitioner(3)
	// Keyed: Kafka's toPositive(murmur2(key)) % n.
	if got, want := p.Partition(&Record{Key: []byte("foobar")}, 7), int((-790332482&0x7fffffff)%7); got != want {
		t.Fatalf("foobar -> %d, want %d", got, want)
	}
	// An empty key is a key, distinct from none.
	if got, want := p.Partition(&Record{Key: []byte{}}, 5), int(murmur2(nil)&0x7fffffff)%5; got != want {
		t.Fatalf("empty key -> %d, want %d", got, want)
	}
	// Keyless: three records per partition, then the next one.
	var got []int
	for range 9 {
		got = append(got, p.Partition(&Record{}, 2))
	}
	want := []int{0, 0, 0, 1, 1, 1, 0, 0, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("keyless records went to %v, want %v", got, want)
		}
	}
}

func TestManualAndRoundRobinPartitioners(t *testing.T) {
	if got := ManualPartitioner().Partition(&Record{Partition: 4, Key: []byte("k")}, 8); got != 4 {
		t.Fatalf("manual: %d", got)
	}
	rr := RoundRobinPartitioner()
	for i := range 7 {
		if got := rr.Partition(&Record{Key: []byte("same")}, 3); got != i%3 {
			t.Fatalf("round-robin record %d -> %d", i, got)
		}
	}
}
