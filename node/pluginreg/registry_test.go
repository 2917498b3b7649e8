package pluginreg_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/node/pluginreg"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/transport/wire"
)

func open(t *testing.T) *pluginreg.Registry {
	t.Helper()
	reg, err := pluginreg.Open(pluginreg.Config{
		FS: vfs.NewMem(), DataDir: "data", Logger: slog.New(slog.DiscardHandler), Now: time.Now,
	}, ownertest.NewMeta())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close(t.Context()) })
	return reg
}

func TestAnEmptyRegistry(t *testing.T) {
	reg := open(t)
	if l := reg.List(); len(l) != 0 {
		t.Errorf("list: %+v, want nothing", l)
	}
	if reg.Host() != nil {
		t.Error("a registry without plugins started a host")
	}
	if err := reg.Remove(t.Context(), "nope"); !errors.Is(err, plugins.ErrUnknownPlugin) {
		t.Errorf("remove of an unknown plugin: %v", err)
	}
	if err := reg.SetPolicy(t.Context(), "reader", wire.Filter{Name: "nope"}); !errors.Is(err, plugins.ErrUnknownPlugin) {
		t.Errorf("a policy naming an unknown plugin: %v", err)
	}
	if _, ok := reg.PolicyOf("reader"); ok {
		t.Error("a refused policy was attached")
	}
	if err := reg.SetPolicy(t.Context(), "reader", wire.Filter{Params: []wire.FilterParam{{Key: "a"}, {Key: "a"}}}); !errors.Is(err, plugins.ErrBadParams) {
		t.Errorf("a parameter given twice: %v", err)
	}
	if f, err := reg.FilterOf(t.Context(), wire.Filter{}, 0); f != nil || err != nil {
		t.Errorf("a poll naming no filter: %v, %v", f, err)
	}
	if _, err := reg.FilterOf(t.Context(), wire.Filter{Name: "nope"}, 0); !errors.Is(err, plugins.ErrUnknownPlugin) {
		t.Errorf("a poll naming an unknown filter: %v", err)
	}
}

func TestAModuleThatDoesNotLoadLeavesNoTrace(t *testing.T) {
	reg := open(t)
	if _, err := reg.Add(t.Context(), "junk", plugins.KindFilter, []byte("not wasm")); !errors.Is(err, plugins.ErrInvalidModule) {
		t.Fatalf("add of a module that is not WebAssembly: %v", err)
	}
	if l := reg.List(); len(l) != 0 {
		t.Errorf("after a refused add: %+v", l)
	}
}
