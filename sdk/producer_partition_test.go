package sdk

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
)

// A record for a partition the topic does not have fails with
// ErrUnknownPartition, saying how many partitions there are, in words.
func TestProducerUnknownPartitionSaysHowManyThereAre(t *testing.T) {
	for parts, want := range map[int]string{1: "the topic has 1 partition", 3: "the topic has 3 partitions"} {
		synctest.Test(t, func(t *testing.T) {
			p := testProducer(t, newFakeNode(), parts, WithPartitioner(ManualPartitioner()))
			var got error
			p.Produce(context.Background(), &Record{Partition: int32(parts), Value: []byte("x")}, func(_ *Record, err error) { got = err })
			var e *Error
			if !errors.Is(got, ErrUnknownPartition) || !errors.As(got, &e) || e.Message != want {
				t.Errorf("%d partitions: got %v, want ErrUnknownPartition saying %q", parts, got, want)
			}
			if err := p.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
