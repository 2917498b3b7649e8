package kafka

import (
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
	"github.com/twmb/franz-go/pkg/kerr"
)

// codeOf maps a node error to the Kafka error code a client acts on as
// Ledge's retry class asks: retry, refresh its view, rejoin, or give up.
func codeOf(err error) int16 {
	if err == nil {
		return 0
	}
	return codeOfStatus(wire.StatusOf(err))
}

func codeOfStatus(s wire.Status) int16 {
	var e *kerr.Error
	switch s {
	case wire.StatusOK:
		return 0
	case wire.StatusUnknownTopic, wire.StatusUnknownPartition, wire.StatusTopicRecreated:
		e = kerr.UnknownTopicOrPartition
	case wire.StatusTopicExists:
		e = kerr.TopicAlreadyExists
	case wire.StatusNotEnoughSpace, wire.StatusPartitionFailed:
		e = kerr.KafkaStorageError
	case wire.StatusInvalidBatch:
		e = kerr.CorruptMessage
	case wire.StatusMessageTooLarge:
		e = kerr.MessageTooLarge
	case wire.StatusForbidden:
		e = kerr.TopicAuthorizationFailed
	case wire.StatusUnauthenticated:
		e = kerr.SaslAuthenticationFailed
	case wire.StatusBusy, wire.StatusTimeout:
		e = kerr.RequestTimedOut
	case wire.StatusShuttingDown:
		e = kerr.NotLeaderForPartition
	case wire.StatusStaleHistory:
		e = kerr.FencedLeaderEpoch
	case wire.StatusUnknownHistory:
		e = kerr.UnknownLeaderEpoch
	case wire.StatusFencedProducer:
		e = kerr.InvalidProducerEpoch
	case wire.StatusUnknownProducer:
		e = kerr.UnknownProducerID
	case wire.StatusOutOfOrderSequence:
		e = kerr.OutOfOrderSequenceNumber
	case wire.StatusDuplicateSequence:
		e = kerr.DuplicateSequenceNumber
	case wire.StatusUnknownMember:
		e = kerr.UnknownMemberID
	case wire.StatusFencedMember, wire.StatusStaleMemberEpoch, wire.StatusUnassignedPartition:
		// The classic protocol's word for "your generation is not the
		// one that holds this": the member rejoins.
		e = kerr.IllegalGeneration
	case wire.StatusOffsetOutOfRange:
		e = kerr.OffsetOutOfRange
	case wire.StatusInvalidArgument, wire.StatusMalformedRequest:
		e = kerr.InvalidRequest
	default:
		e = kerr.UnknownServerError
	}
	return e.Code
}

// leaderEpochCode checks the leader epoch a client states for a
// partition against its history epoch, with the fence's history rule:
// older is FENCED_LEADER_EPOCH (refresh metadata, then validate the
// position with OffsetForLeaderEpoch), newer is UNKNOWN_LEADER_EPOCH.
// A negative epoch states nothing.
func leaderEpochCode(stated int32, history uint64) int16 {
	if stated < 0 {
		return 0
	}
	p := fence.Partition{History: fence.HistoryEpoch(history)}
	t := fence.Token{Kind: fence.HolderAnonymous, History: fence.HistoryEpoch(stated)}
	err := fence.CheckCurrent(p, fence.Holder{Kind: fence.HolderAnonymous}, t)
	return codeOf(asWireError(err))
}

// asWireError gives a fence rejection its wire status.
func asWireError(err error) error {
	if err == nil {
		return nil
	}
	if code, ok := fence.CodeOf(err); ok {
		return &wire.Error{Status: wire.FenceStatusBase + wire.Status(code), Message: err.Error()}
	}
	return err
}

// leaderEpoch is a history epoch as Kafka's int32 leader epoch.
func leaderEpoch(history uint64) int32 {
	if history > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(history)
}
