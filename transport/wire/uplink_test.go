package wire

import (
	"reflect"
	"testing"
)

// TestUplinkMessagesRoundTrip: every uplink message decodes to what was
// encoded, and a truncated body is refused.
func TestUplinkMessagesRoundTrip(t *testing.T) {
	spec := UplinkSpec{Topic: "events", Seeds: []string{"k1:9092", "k2:9092"}, To: "central",
		Partitioning: 1, Overflow: 1, TLS: true, TLSCAFile: "/etc/ca.pem", TLSServer: "kafka",
		SASLMechanism: "SCRAM-SHA-512", SASLUser: "edge", SASLPasswordFile: "/etc/pw"}
	info := UplinkInfo{Spec: spec, Partitions: []UplinkPartitionStatus{
		{Partition: 0, State: 1, Position: 10, HighWatermark: 12, LagRecords: 2, LagAgeNanos: 5e9,
			Forwarded: 10, Dropped: 1, Failures: 3, TransactionalID: "ledge-uplink.n.t.0", LastError: "unreachable"},
	}}
	for _, pair := range []struct{ in, out Message }{
		{&AddUplinkRequest{Spec: spec}, &AddUplinkRequest{}},
		{&AddUplinkReply{}, &AddUplinkReply{}},
		{&ListUplinksRequest{}, &ListUplinksRequest{}},
		{&ListUplinksReply{Uplinks: []UplinkInfo{info, {Spec: UplinkSpec{Topic: "x"}}}}, &ListUplinksReply{}},
		{&UplinkStatusRequest{Topic: "events"}, &UplinkStatusRequest{}},
		{&UplinkStatusReply{Uplink: info}, &UplinkStatusReply{}},
		{&RemoveUplinkRequest{Topic: "events"}, &RemoveUplinkRequest{}},
		{&RemoveUplinkReply{}, &RemoveUplinkReply{}},
	} {
		b, err := pair.in.Encode(nil)
		if err != nil {
			t.Fatalf("%T: %v", pair.in, err)
		}
		if err := pair.out.Decode(b); err != nil {
			t.Fatalf("%T: %v", pair.in, err)
		}
		if !reflect.DeepEqual(pair.in, pair.out) {
			t.Errorf("%T: got %+v, want %+v", pair.in, pair.out, pair.in)
		}
		if pair.in.Kind() != pair.out.Kind() || pair.in.Kind() < KindAddUplink || pair.in.Kind() > KindRemoveUplink {
			t.Errorf("%T: kind %v", pair.in, pair.in.Kind())
		}
		if len(b) > 0 {
			if err := pair.out.Decode(b[:len(b)-1]); err == nil {
				t.Errorf("%T: a truncated body decoded", pair.in)
			}
		}
	}
}
