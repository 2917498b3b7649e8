package plugins

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/ledgemq/ledge/plugins/abi"
)

// maxGuestErrorLen bounds the message a guest passes to the error function.
const maxGuestErrorLen = 1024

// hostFuncs implements the host module (abi.HostModule); docs/PLUGINS.md
// specifies each function.
var hostFuncs = map[string]api.GoModuleFunc{
	"log":            hostLog,
	"error":          hostError,
	"index":          hostIndex,
	"json_get":       hostJSONGet,
	"match_json":     hostMatchJSON,
	"match_contains": hostMatchContains,
}

// instantiateHostModules links the host module, the restricted WASI and
// the metering import into r.
func instantiateHostModules(ctx context.Context, r wazero.Runtime) error {
	for _, m := range []struct {
		name  string
		types map[string]funcType
		funcs map[string]api.GoModuleFunc
	}{
		{hostModuleName, hostFuncTypes, hostFuncs},
		{wasiModuleName, wasiFuncTypes, wasiFuncs()},
		{meterModule, map[string]funcType{meterYield: sig()(valI64)}, map[string]api.GoModuleFunc{meterYield: yield}},
	} {
		b := r.NewHostModuleBuilder(m.name)
		for _, name := range sortedKeys(m.types) {
			t := m.types[name]
			b.NewFunctionBuilder().
				WithGoModuleFunction(m.funcs[name], apiTypes(t.params), apiTypes(t.results)).
				Export(name)
		}
		if _, err := b.Instantiate(ctx); err != nil {
			return fmt.Errorf("plugins: linking host module %q: %w", m.name, err)
		}
	}
	return nil
}

func apiTypes(ts []byte) []api.ValueType {
	out := make([]api.ValueType, len(ts))
	for i, t := range ts {
		out[i] = api.ValueType(t) // wazero's value types are the binary encoding
	}
	return out
}

func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	cs := stateOf(ctx)
	level, ptr, n := int32(stack[0]), uint32(stack[1]), uint32(stack[2])
	msg := read(mod, "ledge.log", ptr, n)
	cs.charge(len(msg))
	lvl := slog.LevelInfo
	switch {
	case level <= abi.LevelDebug:
		lvl = slog.LevelDebug
	case level == abi.LevelWarn:
		lvl = slog.LevelWarn
	case level >= abi.LevelError:
		lvl = slog.LevelError
	}
	cs.inst.log.message(cs, lvl, "log", msg)
}

func hostError(ctx context.Context, mod api.Module, stack []uint64) {
	cs := stateOf(ctx)
	msg := read(mod, "ledge.error", uint32(stack[0]), uint32(stack[1]))
	if len(msg) > maxGuestErrorLen {
		msg = msg[:maxGuestErrorLen]
	}
	cs.guestErr = string(bytes.ToValidUTF8(msg, []byte(string(utf8.RuneError))))
}

func hostIndex(ctx context.Context, mod api.Module, stack []uint64) {
	cs := stateOf(ctx)
	hay := read(mod, "ledge.index", uint32(stack[0]), uint32(stack[1]))
	needle := read(mod, "ledge.index", uint32(stack[2]), uint32(stack[3]))
	cs.charge(len(hay))
	stack[0] = uint64(uint32(int32(bytes.Index(hay, needle))))
}

func hostJSONGet(ctx context.Context, mod api.Module, stack []uint64) {
	cs := stateOf(ctx)
	doc := read(mod, "ledge.json_get", uint32(stack[0]), uint32(stack[1]))
	path := read(mod, "ledge.json_get", uint32(stack[2]), uint32(stack[3]))
	cs.charge(len(doc))
	start, end, ok := abi.JSONFieldSpan(doc, string(path))
	if !ok {
		stack[0] = ^uint64(0) // -1
		return
	}
	stack[0] = uint64(start)<<32 | uint64(end-start)
}

// viewOf returns the records of the current filter or propose call and the
// bitmap at ptr in guest memory, or aborts: the batch helpers only make
// sense inside such a call.
func viewOf(cs *callState, mod api.Module, fn string, ptr uint32) (*View, abi.Bitmap) {
	if cs.view == nil {
		panic(fmt.Errorf("%w: %s called outside %s or %s", errGuestFault, fn, abi.ExportFilter, abi.ExportPropose))
	}
	n := cs.view.Len()
	return cs.view, abi.BitmapOver(read(mod, fn, ptr, uint32(abi.BitmapSize(n))), n)
}

func hostMatchJSON(ctx context.Context, mod api.Module, stack []uint64) {
	cs := stateOf(ctx)
	path := read(mod, "ledge.match_json", uint32(stack[0]), uint32(stack[1]))
	want := read(mod, "ledge.match_json", uint32(stack[2]), uint32(stack[3]))
	v, keep := viewOf(cs, mod, "ledge.match_json", uint32(stack[4]))
	cs.charge(v.dataLen())
	stack[0] = uint64(uint32(abi.MatchJSON(&v.abi, string(path), want, keep)))
}

func hostMatchContains(ctx context.Context, mod api.Module, stack []uint64) {
	cs := stateOf(ctx)
	needle := read(mod, "ledge.match_contains", uint32(stack[0]), uint32(stack[1]))
	v, keep := viewOf(cs, mod, "ledge.match_contains", uint32(stack[2]))
	cs.charge(v.dataLen())
	stack[0] = uint64(uint32(abi.MatchContains(&v.abi, needle, keep)))
}
