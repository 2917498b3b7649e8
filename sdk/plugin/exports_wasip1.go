//go:build wasip1

package plugin

import (
	"unsafe"

	"github.com/ledgemq/ledge/plugins/abi"
)

// The ABI's exports (docs/PLUGINS.md). One instance serves one goroutine
// of the host at a time, so package state is safe here.
var (
	guest  kernel
	buffer []byte // lent to the host by ledge_buffer
)

//go:wasmexport ledge_abi_version
func exportABIVersion() int32 { return abi.Version }

// exportKinds returns the ABI kinds bit set of what is registered.
//
//go:wasmexport ledge_kinds
func exportKinds() int32 {
	var k int32
	if registry.recordFilter != nil || registry.batchFilter != nil {
		k |= abi.KindFilter
	}
	if registry.commitPolicy != nil {
		k |= abi.KindCommitPolicy
	}
	if registry.transform != nil {
		k |= abi.KindTransform
	}
	return k
}

//go:wasmexport ledge_buffer
func exportBuffer(size uint32) uint32 {
	if uint32(cap(buffer)) < size {
		buffer = make([]byte, size)
	}
	buffer = buffer[:size]
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(buffer))))
}

//go:wasmexport ledge_init
func exportInit(kind int32, ptr, n uint32) int32 {
	if err := guest.init(kind, guestBytes(ptr, n)); err != nil {
		return fail(err)
	}
	return 0
}

//go:wasmexport ledge_filter
func exportFilter(ptr, n uint32) int32 {
	r, err := guest.runFilter(guestBytes(ptr, n))
	if err != nil {
		return fail(err)
	}
	return r
}

//go:wasmexport ledge_propose
func exportPropose(ptr, n uint32) int32 {
	r, err := guest.runPropose(guestBytes(ptr, n))
	if err != nil {
		return fail(err)
	}
	return r
}

//go:wasmexport ledge_transform
func exportTransform(ptr, n, state, stateLen uint32) int64 {
	ans, err := guest.runTransform(guestBytes(ptr, n), guestBytes(state, stateLen))
	if err != nil {
		return int64(fail(err))
	}
	return abi.PackAnswer(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(ans)))), uint32(len(ans)))
}

// guestBytes returns the n bytes of linear memory at ptr. The host only
// passes spans of the buffer this package lent it. An empty span is nil:
// its address may lie just past the buffer, where a Go pointer must not
// point (the garbage collector would find it in another object or none).
func guestBytes(ptr, n uint32) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), uintptr(ptr))), n)
}

// fail reports err to the host and returns the ABI's error result.
func fail(err error) int32 {
	msg := err.Error()
	hostError(unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
	return -1
}
