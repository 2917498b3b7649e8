package wire

import "strconv"

// Kind identifies a request and its reply: a reply frame carries the kind
// of the request it answers. The numbers are part of the protocol.
//
// Ranges: 0x0001–0x003F are the requests of version 1; 0x0040–0x004F are
// reserved for consumer groups, 0x0050–0x005F for fenced state,
// 0x0060–0x006F for plugins, 0x0070–0x007F for Kafka uplinks, 0x0080–0x008F for transforms, 0x0090–0x009F for Kafka downlinks;
// 0xFF00–0xFFFF are for private experiments and
// never assigned. A reserved kind has no layout in version 1: a node
// answers it with StatusUnknownKind.
type Kind uint16

// Kinds of version 1.
const (
	KindAuthenticate      Kind = 0x0001
	KindCreateTopic       Kind = 0x0002
	KindDeleteTopic       Kind = 0x0003
	KindListTopics        Kind = 0x0004
	KindDescribeTopic     Kind = 0x0005
	KindPurge             Kind = 0x0006
	KindGetPartitionState Kind = 0x0007

	KindInitProducer Kind = 0x0010
	KindProduce      Kind = 0x0011

	KindAttachConsumer Kind = 0x0020
	KindPoll           Kind = 0x0021
	KindCommit         Kind = 0x0022
	KindResetPosition  Kind = 0x0023
	KindGetCommitted   Kind = 0x0024

	KindCreateToken Kind = 0x0030
	KindListTokens  Kind = 0x0031
	KindRevokeToken Kind = 0x0032
)

// Consumer groups (docs/PROTOCOL.md, "Consumer groups").
const (
	KindJoinGroup     Kind = 0x0040 // join a consumer group
	KindHeartbeat     Kind = 0x0041 // group member heartbeat (assignment reconciliation)
	KindLeaveGroup    Kind = 0x0042 // leave a consumer group
	KindDescribeGroup Kind = 0x0043 // members, assignments with epochs, offsets
	KindListGroups    Kind = 0x0044 // list consumer groups
	KindDeleteGroup   Kind = 0x0045 // delete an empty consumer group and its offsets
)

// Fenced state (docs/PROTOCOL.md §17).
const (
	KindGetState        Kind = 0x0050 // read a partition's state store and the offset it corresponds to
	KindCommitWithState Kind = 0x0051 // commit an offset and state changes atomically
)

// Plugins (docs/PROTOCOL.md §11.1).
const (
	KindAddPlugin    Kind = 0x0060 // register a WebAssembly plugin
	KindListPlugins  Kind = 0x0061 // list plugins
	KindRemovePlugin Kind = 0x0062 // remove a plugin
	KindSetPolicy    Kind = 0x0063 // attach a commit policy to a consumer or group
	KindResetPlugin  Kind = 0x0064 // clear a plugin's quarantine
)

// String returns the kind's name as PROTOCOL.md spells it.
func (k Kind) String() string {
	switch k {
	case KindAuthenticate:
		return "authenticate"
	case KindCreateTopic:
		return "create-topic"
	case KindDeleteTopic:
		return "delete-topic"
	case KindListTopics:
		return "list-topics"
	case KindDescribeTopic:
		return "describe-topic"
	case KindPurge:
		return "purge"
	case KindGetPartitionState:
		return "get-partition-state"
	case KindInitProducer:
		return "init-producer"
	case KindProduce:
		return "produce"
	case KindAttachConsumer:
		return "attach-consumer"
	case KindPoll:
		return "poll"
	case KindCommit:
		return "commit"
	case KindResetPosition:
		return "reset-position"
	case KindGetCommitted:
		return "get-committed"
	case KindCreateToken:
		return "create-token"
	case KindListTokens:
		return "list-tokens"
	case KindRevokeToken:
		return "revoke-token"
	case KindJoinGroup:
		return "join-group"
	case KindHeartbeat:
		return "heartbeat"
	case KindLeaveGroup:
		return "leave-group"
	case KindDescribeGroup:
		return "describe-group"
	case KindListGroups:
		return "list-groups"
	case KindDeleteGroup:
		return "delete-group"
	case KindGetState:
		return "get-state"
	case KindCommitWithState:
		return "commit-with-state"
	case KindAddPlugin:
		return "add-plugin"
	case KindListPlugins:
		return "list-plugins"
	case KindRemovePlugin:
		return "remove-plugin"
	case KindSetPolicy:
		return "set-policy"
	case KindResetPlugin:
		return "reset-plugin"
	case KindAddUplink:
		return "add-uplink"
	case KindListUplinks:
		return "list-uplinks"
	case KindUplinkStatus:
		return "uplink-status"
	case KindRemoveUplink:
		return "remove-uplink"
	case KindAddTransform:
		return "add-transform"
	case KindListTransforms:
		return "list-transforms"
	case KindTransformStatus:
		return "transform-status"
	case KindPauseTransform:
		return "pause-transform"
	case KindResumeTransform:
		return "resume-transform"
	case KindRemoveTransform:
		return "remove-transform"
	case KindAddDownlink:
		return "add-downlink"
	case KindListDownlinks:
		return "list-downlinks"
	case KindDownlinkStatus:
		return "downlink-status"
	case KindRemoveDownlink:
		return "remove-downlink"
	}
	return "kind 0x" + strconv.FormatUint(uint64(k), 16)
}

// Defined reports whether k is a request of this protocol version (one
// with a layout), as opposed to a reserved or unknown kind.
func (k Kind) Defined() bool {
	switch k {
	case KindAuthenticate, KindCreateTopic, KindDeleteTopic, KindListTopics,
		KindDescribeTopic, KindPurge, KindGetPartitionState,
		KindInitProducer, KindProduce,
		KindAttachConsumer, KindPoll, KindCommit, KindResetPosition, KindGetCommitted,
		KindCreateToken, KindListTokens, KindRevokeToken,
		KindJoinGroup, KindHeartbeat, KindLeaveGroup, KindDescribeGroup, KindListGroups,
		KindGetState, KindCommitWithState, KindDeleteGroup,
		KindAddPlugin, KindListPlugins, KindRemovePlugin, KindSetPolicy, KindResetPlugin,
		KindAddUplink, KindListUplinks, KindUplinkStatus, KindRemoveUplink,
		KindAddTransform, KindListTransforms, KindTransformStatus, KindPauseTransform, KindResumeTransform, KindRemoveTransform,
		KindAddDownlink, KindListDownlinks, KindDownlinkStatus, KindRemoveDownlink:
		return true
	}
	return false
}

// Reserved reports whether k is reserved for a later version (groups,
// state, plugins, or private experiments).
func (k Kind) Reserved() bool {
	return !k.Defined() && ((k >= 0x0040 && k <= 0x006F) || k >= 0xFF00)
}
