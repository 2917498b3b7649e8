package wire

import (
	"strconv"
	"time"
)

// Plugins (kinds 0x0060–0x0064). An administrator adds a WebAssembly
// module under a name as a filter or a commit policy, lists and removes
// plugins, and attaches a commit policy to a named consumer. A poll names
// a filter in its Filter field; its reply then carries PayloadFiltered
// batches (PROTOCOL.md §11). The kinds stay reserved in Kind.Reserved
// (a node without plugins answers them with StatusUnknownKind); a node
// serving plugins decodes their bodies with these messages.

// PluginKind says what a plugin does. The numbers match the plugin ABI's
// kinds (docs/PLUGINS.md).
type PluginKind uint8

// Plugin kinds.
const (
	// PluginFilter decides which records of a poll a consumer receives.
	PluginFilter PluginKind = 1
	// PluginCommitPolicy proposes a consumer's automatic commit.
	PluginCommitPolicy PluginKind = 2
	// PluginTransform turns records into output records, with a state.
	PluginTransform PluginKind = 4
	pluginKindMax              = PluginTransform
)

// String returns "filter", "commit-policy" or "transform", as the CLI
// spells them.
func (k PluginKind) String() string {
	switch k {
	case PluginFilter:
		return "filter"
	case PluginCommitPolicy:
		return "commit-policy"
	case PluginTransform:
		return "transform"
	}
	return "plugin-kind(" + strconv.Itoa(int(k)) + ")"
}

// MaxPluginModuleLen bounds a module in AddPluginRequest; a frame bounds
// it further (DefaultMaxFrameSize).
const MaxPluginModuleLen = 32 << 20

// AddPluginRequest adds (or replaces) the plugin called Name. The node
// compiles the module before it answers; a module that does not load is
// refused with StatusInvalidArgument and the reason.
//
//	name str16 | kind u8 (1 filter, 2 commit policy, 4 transform) | module bytes32
type AddPluginRequest struct {
	Name       string
	PluginKind PluginKind
	// Module is the WebAssembly binary. After Decode it aliases the frame
	// body.
	Module []byte
}

// Kind implements Message.
func (*AddPluginRequest) Kind() Kind { return KindAddPlugin }

// Encode implements Message.
func (m *AddPluginRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "add-plugin")
	w.str16(m.Name, MaxNameLen, "plugin name")
	w.enum(uint8(m.PluginKind), uint8(pluginKindMax), "plugin kind")
	w.bytes32(m.Module, MaxPluginModuleLen, "module")
	return w.result()
}

// Decode implements Message.
func (m *AddPluginRequest) Decode(b []byte) error {
	r := newFieldReader(b, "add-plugin")
	r.str16(&m.Name, MaxNameLen, "plugin name")
	m.PluginKind = PluginKind(r.enum(uint8(pluginKindMax), "plugin kind"))
	m.Module = r.bytes32(MaxPluginModuleLen, "module")
	return r.finish()
}

// PluginInfo describes a plugin and its counters since the node started.
//
//	name str16 | kind u8 | digest [32] | size u32 | added i64 unix ms |
//	calls u64 | failures u64 | records in u64 | records out u64 |
//	call time u64 ns | timeouts u64 | traps u64 | invalid answers u64 |
//	memory pages u64 | quarantined u8 | state u8 | reason str16
type PluginInfo struct {
	Name string
	Kind PluginKind
	// Digest is the SHA-256 of the module: the name of its stored copy.
	Digest [32]byte
	Size   uint32
	Added  time.Time
	// Calls, Failures, RecordsIn and RecordsOut count the plugin's calls
	// since the node started, the calls that failed, the records shown to
	// it and the records its filters kept.
	Calls, Failures, RecordsIn, RecordsOut uint64
	CallTime                               time.Duration
	Timeouts, Traps, InvalidAnswers        uint64
	// MemoryPages is the linear memory of its live instances (64 KiB
	// pages).
	MemoryPages uint64
	// Quarantined: the plugin failed too often and refuses calls until an
	// operator resets it or adds its module again (State is
	// PluginQuarantined).
	Quarantined bool
	// State says whether the plugin serves calls; Reason why not (the
	// last failure of a quarantined plugin, why a plugin did not load).
	State  PluginState
	Reason string
}

// PluginState is whether a registered plugin serves calls.
type PluginState uint8

// Plugin states.
const (
	// PluginReady: the plugin is loaded and serves calls.
	PluginReady PluginState = 0
	// PluginQuarantined: the plugin failed too often; calls are refused
	// until an operator resets it (reset-plugin) or adds its module again.
	// The quarantine and its reason survive restarts.
	PluginQuarantined PluginState = 1
	// PluginLoading: the node is still loading the plugin after a start.
	PluginLoading PluginState = 2
	// PluginNotLoaded: the node could not load the registered plugin (a
	// missing or damaged module file); Reason says why.
	PluginNotLoaded PluginState = 3
	pluginStateMax              = PluginNotLoaded
)

// String returns the state as the CLI and the status page spell it.
func (s PluginState) String() string {
	switch s {
	case PluginReady:
		return "ok"
	case PluginQuarantined:
		return "quarantined"
	case PluginLoading:
		return "loading"
	case PluginNotLoaded:
		return "not loaded"
	}
	return "plugin-state(" + strconv.Itoa(int(s)) + ")"
}

const pluginInfoMinSize = 2 + 1 + 32 + 4 + 8 + 9*8 + 1 + 1 + 2

func (p *PluginInfo) put(w *fieldWriter) {
	w.str16(p.Name, MaxNameLen, "plugin name")
	w.enum(uint8(p.Kind), uint8(pluginKindMax), "plugin kind")
	w.fixed(p.Digest[:])
	w.u32(p.Size)
	w.i64(unixMillis(p.Added))
	w.u64(p.Calls)
	w.u64(p.Failures)
	w.u64(p.RecordsIn)
	w.u64(p.RecordsOut)
	w.duration(p.CallTime, "call time")
	w.u64(p.Timeouts)
	w.u64(p.Traps)
	w.u64(p.InvalidAnswers)
	w.u64(p.MemoryPages)
	w.bool8(p.Quarantined)
	w.enum(uint8(p.State), uint8(pluginStateMax), "plugin state")
	w.text(p.Reason)
}

func (p *PluginInfo) get(r *fieldReader) {
	r.str16(&p.Name, MaxNameLen, "plugin name")
	p.Kind = PluginKind(r.enum(uint8(pluginKindMax), "plugin kind"))
	copy(p.Digest[:], r.fixed(32, "digest"))
	p.Size = r.u32("size")
	p.Added = fromUnixMillis(r.i64("added"))
	p.Calls = r.u64("calls")
	p.Failures = r.u64("failures")
	p.RecordsIn = r.u64("records in")
	p.RecordsOut = r.u64("records out")
	p.CallTime = r.duration("call time")
	p.Timeouts = r.u64("timeouts")
	p.Traps = r.u64("traps")
	p.InvalidAnswers = r.u64("invalid answers")
	p.MemoryPages = r.u64("memory pages")
	p.Quarantined = r.bool8("quarantined")
	p.State = PluginState(r.enum(uint8(pluginStateMax), "plugin state"))
	r.str16(&p.Reason, MaxTextLen, "reason")
}

// unixMillis is t in Unix milliseconds; the zero time is 0.
func unixMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromUnixMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// AddPluginReply describes the plugin as added.
//
//	plugin info
type AddPluginReply struct {
	Plugin PluginInfo
}

// Kind implements Message.
func (*AddPluginReply) Kind() Kind { return KindAddPlugin }

// Encode implements Message.
func (m *AddPluginReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "add-plugin reply")
	m.Plugin.put(&w)
	return w.result()
}

// Decode implements Message.
func (m *AddPluginReply) Decode(b []byte) error {
	r := newFieldReader(b, "add-plugin reply")
	m.Plugin.get(&r)
	return r.finish()
}

// ListPluginsRequest is empty: it lists every plugin.
type ListPluginsRequest struct{}

// Kind implements Message.
func (*ListPluginsRequest) Kind() Kind { return KindListPlugins }

// Encode implements Message.
func (*ListPluginsRequest) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*ListPluginsRequest) Decode(b []byte) error {
	r := newFieldReader(b, "list-plugins")
	return r.finish()
}

// ListPluginsReply lists the plugins by name.
//
//	count u32 | plugin info × count
type ListPluginsReply struct {
	Plugins []PluginInfo
}

// Kind implements Message.
func (*ListPluginsReply) Kind() Kind { return KindListPlugins }

// Encode implements Message.
func (m *ListPluginsReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "list-plugins reply")
	w.count(len(m.Plugins), "plugins")
	for i := range m.Plugins {
		m.Plugins[i].put(&w)
	}
	return w.result()
}

// Decode implements Message.
func (m *ListPluginsReply) Decode(b []byte) error {
	r := newFieldReader(b, "list-plugins reply")
	m.Plugins = resize(m.Plugins, r.count(pluginInfoMinSize, "plugins"))
	for i := range m.Plugins {
		m.Plugins[i].get(&r)
	}
	return r.finish()
}

// RemovePluginRequest removes the plugin called Name. Polls naming it
// fail from then on; commit policies attached under its name stop
// proposing.
//
//	name str16
type RemovePluginRequest struct {
	Name string
}

// Kind implements Message.
func (*RemovePluginRequest) Kind() Kind { return KindRemovePlugin }

// Encode implements Message.
func (m *RemovePluginRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "remove-plugin")
	w.str16(m.Name, MaxNameLen, "plugin name")
	return w.result()
}

// Decode implements Message.
func (m *RemovePluginRequest) Decode(b []byte) error {
	r := newFieldReader(b, "remove-plugin")
	r.str16(&m.Name, MaxNameLen, "plugin name")
	return r.finish()
}

// RemovePluginReply is empty.
type RemovePluginReply struct{}

// Kind implements Message.
func (*RemovePluginReply) Kind() Kind { return KindRemovePlugin }

// Encode implements Message.
func (*RemovePluginReply) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*RemovePluginReply) Decode(b []byte) error {
	r := newFieldReader(b, "remove-plugin reply")
	return r.finish()
}

// PolicyTarget says what a commit policy is attached to.
type PolicyTarget uint8

// Policy targets.
const (
	// PolicyConsumer: a named consumer, on every partition it polls.
	PolicyConsumer PolicyTarget = 0
	// PolicyGroup: a consumer group, on every poll of each of its
	// members. The policy is kept with the group (DescribeGroupReply
	// shows it); setting one on a group that does not exist yet creates
	// it, empty.
	PolicyGroup     PolicyTarget = 1
	policyTargetMax              = PolicyGroup
)

// String returns "consumer" or "group".
func (t PolicyTarget) String() string {
	switch t {
	case PolicyConsumer:
		return "consumer"
	case PolicyGroup:
		return "group"
	}
	return "policy-target(" + strconv.Itoa(int(t)) + ")"
}

// SetPolicyRequest attaches the commit policy Policy.Name, with its
// parameters, to a named consumer or a group; an empty Policy.Name
// detaches it. Each poll of the consumer (or of a member of the group)
// then runs the policy on what it delivered, and its proposal becomes a
// commit carrying the poll's token, applied only if the token is still
// current.
//
//	target u8 (0 consumer, 1 group) | name str16 | policy (as a poll's filter)
type SetPolicyRequest struct {
	Target PolicyTarget
	Name   string
	Policy Filter
}

// Kind implements Message.
func (*SetPolicyRequest) Kind() Kind { return KindSetPolicy }

// Encode implements Message.
func (m *SetPolicyRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "set-policy")
	w.enum(uint8(m.Target), uint8(policyTargetMax), "policy target")
	w.str16(m.Name, MaxNameLen, "consumer or group")
	m.Policy.put(&w)
	return w.result()
}

// Decode implements Message.
func (m *SetPolicyRequest) Decode(b []byte) error {
	r := newFieldReader(b, "set-policy")
	m.Target = PolicyTarget(r.enum(uint8(policyTargetMax), "policy target"))
	r.str16(&m.Name, MaxNameLen, "consumer or group")
	m.Policy.get(&r)
	return r.finish()
}

// SetPolicyReply is empty.
type SetPolicyReply struct{}

// Kind implements Message.
func (*SetPolicyReply) Kind() Kind { return KindSetPolicy }

// Encode implements Message.
func (*SetPolicyReply) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*SetPolicyReply) Decode(b []byte) error {
	r := newFieldReader(b, "set-policy reply")
	return r.finish()
}

// ResetPluginRequest clears the quarantine of the plugin called Name (and
// its strikes): it serves calls again. The node records the reset, so the
// plugin is not quarantined again by its next start.
//
//	name str16
type ResetPluginRequest struct {
	Name string
}

// Kind implements Message.
func (*ResetPluginRequest) Kind() Kind { return KindResetPlugin }

// Encode implements Message.
func (m *ResetPluginRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "reset-plugin")
	w.str16(m.Name, MaxNameLen, "plugin name")
	return w.result()
}

// Decode implements Message.
func (m *ResetPluginRequest) Decode(b []byte) error {
	r := newFieldReader(b, "reset-plugin")
	r.str16(&m.Name, MaxNameLen, "plugin name")
	return r.finish()
}

// ResetPluginReply describes the plugin as reset.
//
//	plugin info
type ResetPluginReply struct {
	Plugin PluginInfo
}

// Kind implements Message.
func (*ResetPluginReply) Kind() Kind { return KindResetPlugin }

// Encode implements Message.
func (m *ResetPluginReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "reset-plugin reply")
	m.Plugin.put(&w)
	return w.result()
}

// Decode implements Message.
func (m *ResetPluginReply) Decode(b []byte) error {
	r := newFieldReader(b, "reset-plugin reply")
	m.Plugin.get(&r)
	return r.finish()
}
