//go:build wasip1

package plugin

import (
	"unsafe"

	"github.com/ledgemq/ledge/plugins/abi"
)

// The host's functions (docs/PLUGINS.md, "Host functions").

//go:wasmimport ledge log
func hostLog(level int32, ptr unsafe.Pointer, n uint32)

//go:wasmimport ledge error
func hostError(ptr unsafe.Pointer, n uint32)

//go:wasmimport ledge index
func hostIndex(hay unsafe.Pointer, hayLen uint32, needle unsafe.Pointer, needleLen uint32) int32

//go:wasmimport ledge json_get
func hostJSONGet(doc unsafe.Pointer, docLen uint32, path unsafe.Pointer, pathLen uint32) int64

//go:wasmimport ledge match_json
func hostMatchJSON(path unsafe.Pointer, pathLen uint32, want unsafe.Pointer, wantLen uint32, bitmap unsafe.Pointer) int32

//go:wasmimport ledge match_contains
func hostMatchContains(needle unsafe.Pointer, needleLen uint32, bitmap unsafe.Pointer) int32

func bytesPtr(b []byte) unsafe.Pointer  { return unsafe.Pointer(unsafe.SliceData(b)) }
func stringPtr(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }

// Log logs msg to the node's log, tagged with the plugin's name. The host
// bounds what one call may log.
func Log(level Level, msg string) { hostLog(int32(level), stringPtr(msg), uint32(len(msg))) }

// NativeIndex returns the index of the first needle in hay, or -1, searched
// by the host.
func NativeIndex(hay, needle []byte) int {
	return int(hostIndex(bytesPtr(hay), uint32(len(hay)), bytesPtr(needle), uint32(len(needle))))
}

// NativeJSONField is JSONField computed by the host: one host call per
// lookup, the scan in native code.
func NativeJSONField(doc []byte, path string) ([]byte, bool) {
	r := hostJSONGet(bytesPtr(doc), uint32(len(doc)), stringPtr(path), uint32(len(path)))
	if r < 0 {
		return nil, false
	}
	start, n := uint32(r>>32), uint32(r)
	return doc[start : start+n : start+n], true
}

// NativeMatchJSON keeps, in keep, each record of b whose value is a JSON
// object with a member at path equal to want (JSONValueEquals), drops the
// others, and returns how many it kept: the whole batch in one host call.
// b must be the batch of the current call.
func NativeMatchJSON(b *Batch, path, want string, keep Bitmap) int {
	_ = b
	return int(hostMatchJSON(stringPtr(path), uint32(len(path)), stringPtr(want), uint32(len(want)),
		bytesPtr(abi.BitmapOver(keep.Bytes(), keep.Len()).Bytes())))
}

// NativeMatchContains keeps, in keep, each record of b whose value
// contains needle, drops the others, and returns how many it kept: the
// whole batch in one host call. b must be the batch of the current call.
func NativeMatchContains(b *Batch, needle []byte, keep Bitmap) int {
	_ = b
	return int(hostMatchContains(bytesPtr(needle), uint32(len(needle)), bytesPtr(keep.Bytes())))
}
