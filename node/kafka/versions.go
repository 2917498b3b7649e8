package kafka

import (
	"reflect"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// served are the APIs this listener answers and the versions of each it
// speaks. The ranges stop before versions that need what Ledge does not
// have (topic ids in Produce and Fetch, batched group requests).
var served = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: kmsg.Produce.Int16(), MinVersion: 3, MaxVersion: 9},
	{ApiKey: kmsg.Fetch.Int16(), MinVersion: 4, MaxVersion: 12},
	{ApiKey: kmsg.ListOffsets.Int16(), MinVersion: 1, MaxVersion: 7},
	{ApiKey: kmsg.Metadata.Int16(), MinVersion: 1, MaxVersion: 12},
	{ApiKey: kmsg.OffsetCommit.Int16(), MinVersion: 2, MaxVersion: 8},
	{ApiKey: kmsg.OffsetFetch.Int16(), MinVersion: 1, MaxVersion: 7},
	{ApiKey: kmsg.FindCoordinator.Int16(), MinVersion: 0, MaxVersion: 4},
	{ApiKey: kmsg.JoinGroup.Int16(), MinVersion: 0, MaxVersion: 7},
	{ApiKey: kmsg.Heartbeat.Int16(), MinVersion: 0, MaxVersion: 4},
	{ApiKey: kmsg.LeaveGroup.Int16(), MinVersion: 0, MaxVersion: 4},
	{ApiKey: kmsg.SyncGroup.Int16(), MinVersion: 0, MaxVersion: 5},
	{ApiKey: kmsg.DescribeGroups.Int16(), MinVersion: 0, MaxVersion: 5},
	{ApiKey: kmsg.ListGroups.Int16(), MinVersion: 0, MaxVersion: 4},
	{ApiKey: kmsg.SASLHandshake.Int16(), MinVersion: 0, MaxVersion: 1},
	{ApiKey: kmsg.ApiVersions.Int16(), MinVersion: 0, MaxVersion: 3},
	{ApiKey: kmsg.CreateTopics.Int16(), MinVersion: 0, MaxVersion: 7},
	{ApiKey: kmsg.DeleteTopics.Int16(), MinVersion: 0, MaxVersion: 5},
	{ApiKey: kmsg.DeleteRecords.Int16(), MinVersion: 0, MaxVersion: 2},
	{ApiKey: kmsg.InitProducerID.Int16(), MinVersion: 0, MaxVersion: 4},
	{ApiKey: kmsg.OffsetForLeaderEpoch.Int16(), MinVersion: 2, MaxVersion: 4},
	{ApiKey: kmsg.SASLAuthenticate.Int16(), MinVersion: 0, MaxVersion: 2},
	{ApiKey: kmsg.ConsumerGroupHeartbeat.Int16(), MinVersion: 0, MaxVersion: 1},
}

// supported returns the versions of key this listener speaks.
func supported(key int16) (lo, hi int16, ok bool) {
	i := slices.IndexFunc(served, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == key })
	if i < 0 {
		return 0, 0, false
	}
	return served[i].MinVersion, served[i].MaxVersion, true
}

// apiKeys is the ApiVersions answer (a copy: responses are not shared).
func apiKeys() []kmsg.ApiVersionsResponseApiKey { return slices.Clone(served) }

// setErrorCodes sets the top-level ErrorCode of a response, when it has
// one.
func setErrorCodes(r kmsg.Response, code int16) {
	v := reflect.ValueOf(r)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return
	}
	if f := v.Elem().FieldByName("ErrorCode"); f.IsValid() && f.CanSet() && f.Kind() == reflect.Int16 {
		f.SetInt(int64(code))
	}
}

// newRequest is a request of the API key, for the APIs the listener
// serves; nil for any other. A switch over these types alone, rather
// than kmsg.RequestForKey, leaves the other request and response types
// of kmsg out of the binary.
func newRequest(key int16) kmsg.Request {
	switch kmsg.Key(key) {
	case kmsg.Produce:
		return kmsg.NewPtrProduceRequest()
	case kmsg.Fetch:
		return kmsg.NewPtrFetchRequest()
	case kmsg.ListOffsets:
		return kmsg.NewPtrListOffsetsRequest()
	case kmsg.Metadata:
		return kmsg.NewPtrMetadataRequest()
	case kmsg.OffsetCommit:
		return kmsg.NewPtrOffsetCommitRequest()
	case kmsg.OffsetFetch:
		return kmsg.NewPtrOffsetFetchRequest()
	case kmsg.FindCoordinator:
		return kmsg.NewPtrFindCoordinatorRequest()
	case kmsg.JoinGroup:
		return kmsg.NewPtrJoinGroupRequest()
	case kmsg.Heartbeat:
		return kmsg.NewPtrHeartbeatRequest()
	case kmsg.LeaveGroup:
		return kmsg.NewPtrLeaveGroupRequest()
	case kmsg.SyncGroup:
		return kmsg.NewPtrSyncGroupRequest()
	case kmsg.DescribeGroups:
		return kmsg.NewPtrDescribeGroupsRequest()
	case kmsg.ListGroups:
		return kmsg.NewPtrListGroupsRequest()
	case kmsg.SASLHandshake:
		return kmsg.NewPtrSASLHandshakeRequest()
	case kmsg.ApiVersions:
		return kmsg.NewPtrApiVersionsRequest()
	case kmsg.CreateTopics:
		return kmsg.NewPtrCreateTopicsRequest()
	case kmsg.DeleteTopics:
		return kmsg.NewPtrDeleteTopicsRequest()
	case kmsg.DeleteRecords:
		return kmsg.NewPtrDeleteRecordsRequest()
	case kmsg.InitProducerID:
		return kmsg.NewPtrInitProducerIDRequest()
	case kmsg.OffsetForLeaderEpoch:
		return kmsg.NewPtrOffsetForLeaderEpochRequest()
	case kmsg.SASLAuthenticate:
		return kmsg.NewPtrSASLAuthenticateRequest()
	case kmsg.ConsumerGroupHeartbeat:
		return kmsg.NewPtrConsumerGroupHeartbeatRequest()
	}
	return nil
}
