package pluginreg

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/transport/wire"
)

// The plugin registry's life across restarts: loading the registered
// plugins in the background once the node listens, waiting for one a poll
// names, and keeping quarantines in the metadata store until an operator
// clears them.
//
// Loading is off the start path because compiling a Go plugin takes about
// a second of CPU per plugin on a small machine (none with a warm
// compilation cache): the node serves everything else meanwhile, and a
// poll naming a plugin not loaded yet waits for it within its max wait.

// StartLoading loads every registered plugin in the background, one at a
// time in name order, each under adminMu (an operator's add or remove of
// the same name is ordered with its load). Loading stops when drain ends
// (a shutdown began): a poll or a commit policy still waiting for a
// plugin is answered at once, with the retryable plugin-loading status,
// and the compile under way is abandoned, so a stop never waits for the
// plugins.
func (reg *Registry) StartLoading(drain context.Context) {
	if reg == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopOnDrain := context.AfterFunc(drain, cancel)
	reg.mu.Lock()
	reg.stopLoad = cancel
	reg.draining = drain.Done()
	names := make([]string, 0, len(reg.loading))
	for name := range reg.loading {
		names = append(names, name)
	}
	reg.bg.Add(1)
	reg.mu.Unlock()
	slices.Sort(names)
	go func() {
		defer reg.bg.Done()
		defer close(reg.loaded)
		defer stopOnDrain()
		start := time.Now()
		loaded := 0
		for _, name := range names {
			if reg.load(ctx, name) {
				loaded++
			}
		}
		if len(names) == 0 {
			return
		}
		var compiles uint64
		if h := reg.host.Load(); h != nil {
			compiles = h.Compiles()
		}
		took := time.Since(start).Round(time.Millisecond)
		if ctx.Err() != nil {
			reg.log.Info("plugin loading stopped by the shutdown", "plugins", len(names), "loaded", loaded, "compiled", compiles, "took", took)
			return
		}
		reg.log.Info("plugins loaded", "plugins", len(names), "compiled", compiles, "took", took)
	}()
}

// load adds one registered plugin to the host, with its recorded
// quarantine, unless an operator added or removed it meanwhile; it
// reports whether the plugin is loaded. A load the shutdown interrupts
// leaves the plugin loading (the node stops; its next start loads it).
func (reg *Registry) load(ctx context.Context, name string) bool {
	reg.adminMu.Lock()
	defer reg.adminMu.Unlock()
	reg.mu.RLock()
	rec, ok := reg.records[name]
	_, pending := reg.loading[name]
	reg.mu.RUnlock()
	if !ok || !pending {
		return false
	}
	err := ctx.Err()
	var host *plugins.Host
	if err == nil {
		host, err = reg.hostLocked(ctx)
	}
	if err == nil {
		var wasm []byte
		if wasm, err = reg.readModuleUntil(ctx, rec.Digest); err == nil {
			_, err = host.Load(ctx, name, plugins.Kind(rec.Kind), wasm)
		}
	}
	if err == nil && rec.Quarantined {
		err = host.Quarantine(name, rec.Reason)
	}
	if ctx.Err() != nil {
		return false
	}
	why := ""
	if err != nil {
		why = err.Error()
		reg.log.Error("plugin not loaded", "plugin", name, "digest", rec.Digest, "err", err)
	}
	reg.mu.Lock()
	reg.doneLoadingLocked(name, why)
	reg.mu.Unlock()
	return err == nil
}

// readModuleUntil is readModule that the loader walks away from when ctx
// ends: a read held up by a slow or hung disk (an SD card's) does not
// hold the node's shutdown; it finishes on its own, its result dropped.
func (reg *Registry) readModuleUntil(ctx context.Context, digest string) ([]byte, error) {
	type result struct {
		wasm []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		wasm, err := reg.readModule(digest)
		done <- result{wasm, err}
	}()
	select {
	case r := <-done:
		return r.wasm, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// doneLoadingLocked ends the wait for name's load, noting why it failed
// (empty: it did not). Called with reg.mu held.
func (reg *Registry) doneLoadingLocked(name, why string) {
	if ch, ok := reg.loading[name]; ok {
		close(ch)
		delete(reg.loading, name)
	}
	if why != "" {
		reg.notLoaded[name] = why
	} else {
		delete(reg.notLoaded, name)
	}
}

// AwaitLoaded waits for plugin name to be loaded, if it is still
// loading, for at most maxWait, and no longer than the node runs: when
// the wait ends first, or a shutdown began, it fails with
// ErrLoading. A registered plugin whose load failed fails with
// ErrUnknownPlugin and the reason.
func (reg *Registry) AwaitLoaded(ctx context.Context, name string, maxWait time.Duration) error {
	reg.mu.RLock()
	ch, draining := reg.loading[name], reg.draining
	reg.mu.RUnlock()
	if ch != nil {
		loading := fmt.Errorf("%w: %q: the node started recently and is still loading its plugins; poll again shortly", ErrLoading, name)
		stopping := fmt.Errorf("%w: %q: the node is shutting down before it loaded its plugins; poll again once it is back", ErrLoading, name)
		select {
		case <-draining:
			return stopping
		default:
		}
		if maxWait <= 0 {
			return loading
		}
		if hook := reg.Awaiting.Load(); hook != nil {
			(*hook)(name)
		}
		t := time.NewTimer(maxWait)
		defer t.Stop()
		select {
		case <-ch:
		case <-t.C:
			return loading
		case <-draining:
			return stopping
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	reg.mu.RLock()
	why, failed := reg.notLoaded[name]
	reg.mu.RUnlock()
	if failed {
		return fmt.Errorf("%w: %q is registered but could not be loaded: %s", plugins.ErrUnknownPlugin, name, why)
	}
	return nil
}

// WaitLoaded waits until the plugins registered at the start are loaded
// (or failed to).
func (reg *Registry) WaitLoaded(ctx context.Context) error {
	if reg == nil {
		return nil
	}
	select {
	case <-reg.loaded:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// quarantined records a quarantine the host decided (Host.OnQuarantine),
// so that it survives a restart. A plugin replaced or removed meanwhile
// keeps its new record.
func (reg *Registry) quarantined(name string, digest plugins.Digest, reason string) {
	reg.mu.Lock()
	if reg.closing {
		reg.mu.Unlock()
		return
	}
	reg.bg.Add(1)
	reg.mu.Unlock()
	defer reg.bg.Done()
	reg.adminMu.Lock()
	defer reg.adminMu.Unlock()
	reg.mu.RLock()
	rec, ok := reg.records[name]
	reg.mu.RUnlock()
	if !ok || rec.Digest != digest.String() || rec.Quarantined {
		return
	}
	// An operator who reset the plugin or added its module again before
	// this ran has cleared the quarantine in the host: it is not recorded.
	if info, err := reg.Stat(name); err != nil || !info.Stats.Quarantined {
		return
	}
	rec.Quarantined, rec.Reason, rec.QuarantinedAt = true, reason, reg.now()
	if err := reg.putRecord(context.Background(), append(slices.Clone(keyPlugins), name...), rec); err != nil {
		reg.log.Warn("recording a plugin's quarantine", "plugin", name, "err", err)
		return
	}
	reg.mu.Lock()
	reg.records[name] = rec
	reg.mu.Unlock()
}

// Reset clears the quarantine and the strikes of plugin name, in the
// metadata store first.
func (reg *Registry) Reset(ctx context.Context, name string) (wire.PluginInfo, error) {
	if reg == nil {
		return wire.PluginInfo{}, fmt.Errorf("%w: %q: this node runs no plugins", plugins.ErrUnknownPlugin, name)
	}
	reg.adminMu.Lock()
	defer reg.adminMu.Unlock()
	reg.mu.RLock()
	rec, ok := reg.records[name]
	reg.mu.RUnlock()
	if !ok {
		return wire.PluginInfo{}, fmt.Errorf("%w: %q", plugins.ErrUnknownPlugin, name)
	}
	if rec.Quarantined {
		rec.Quarantined, rec.Reason, rec.QuarantinedAt = false, "", time.Time{}
		if err := reg.putRecord(ctx, append(slices.Clone(keyPlugins), name...), rec); err != nil {
			return wire.PluginInfo{}, err
		}
		reg.mu.Lock()
		reg.records[name] = rec
		reg.mu.Unlock()
	}
	if h := reg.host.Load(); h != nil {
		if err := h.Reset(name); err != nil {
			reg.mu.RLock()
			_, loading := reg.loading[name]
			reg.mu.RUnlock()
			if !loading {
				return wire.PluginInfo{}, err
			}
		}
	}
	reg.log.Info("plugin reset", "plugin", name)
	for _, v := range reg.List() {
		if v.Name == name {
			return v.PluginInfo, nil
		}
	}
	return wire.PluginInfo{}, fmt.Errorf("%w: %q", plugins.ErrUnknownPlugin, name)
}

// View is a plugin as listed: its wire description, and the strikes
// held against it.
type View struct {
	wire.PluginInfo
	Strikes uint64
}

// List describes every registered plugin, by name: the host's counters
// for those loaded, the record for those loading or not loaded, and the
// time each was added (not loaded).
func (reg *Registry) List() []View {
	if reg == nil {
		return nil
	}
	var infos []plugins.Info
	if h := reg.host.Load(); h != nil {
		infos = h.List()
	}
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	out := make([]View, 0, len(reg.records))
	seen := make(map[string]bool, len(infos))
	for _, i := range infos {
		v := View{PluginInfo: InfoToWire(i), Strikes: uint64(i.Stats.Strikes)}
		if rec, ok := reg.records[i.Name]; ok && rec.Digest == i.Digest.String() {
			v.Added = rec.Added
		}
		seen[i.Name] = true
		out = append(out, v)
	}
	for name, rec := range reg.records {
		if seen[name] {
			continue
		}
		v := View{PluginInfo: wire.PluginInfo{Name: name, Kind: wire.PluginKind(rec.Kind), Added: rec.Added, State: wire.PluginLoading}}
		if d, err := hex.DecodeString(rec.Digest); err == nil && len(d) == len(v.Digest) {
			copy(v.Digest[:], d)
		}
		if why, failed := reg.notLoaded[name]; failed {
			v.State, v.Reason = wire.PluginNotLoaded, why
		} else if _, loading := reg.loading[name]; !loading {
			continue // added or removed while listing
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b View) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}
