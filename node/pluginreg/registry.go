package pluginreg

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/transport/wire"
)

// Dir is the directory of the data directory holding plugin
// modules, and CacheDir the compilation cache (used when the
// node's file system is the disk's, see diskBacked).
const (
	Dir      = "plugins"
	CacheDir = "plugins-cache"
)

var (
	keyPlugins  = []byte("plugins/name/")
	keyPolicies = []byte("plugins/policy/")
)

// pluginRecord is the stored registration of a plugin. A removed plugin
// keeps a record with Removed set (the metadata store has no delete).
// A quarantine is kept in the record, with its reason, until an operator
// resets the plugin or adds its module again.
type pluginRecord struct {
	V       int       `json:"v"`
	Kind    uint8     `json:"kind"`
	Digest  string    `json:"digest"`
	Added   time.Time `json:"added"`
	Removed bool      `json:"removed,omitempty"`

	Quarantined   bool      `json:"quarantined,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	QuarantinedAt time.Time `json:"quarantinedAt,omitzero"`
}

// policyRecord is a commit policy attached to a named consumer; a group
// keeps its own in its record (group.PolicyRecord).
type policyRecord = group.PolicyRecord

// pluginRecordVersion is the version of the plugin registry's records,
// those of plugins and of policies alike.
const pluginRecordVersion = group.RecordVersion

// Registry is the node's plugin state. The host (a WebAssembly
// runtime) is created with the first plugin, so a node without plugins
// pays nothing for them.
type Registry struct {
	host atomic.Pointer[plugins.Host] // nil until the first plugin
	cfg  plugins.Config
	fs   vfs.FS
	dir  string
	meta owner.Metadata
	now  func() time.Time
	log  interface {
		Info(msg string, args ...any)
		Warn(msg string, args ...any)
		Error(msg string, args ...any)
		Debug(msg string, args ...any)
	}

	// adminMu serializes registry changes (an add holds it while the
	// module compiles, and so does the loader for each plugin it loads);
	// mu guards the maps, which polls read.
	adminMu  sync.Mutex
	mu       sync.RWMutex
	records  map[string]pluginRecord
	policies map[string]policyRecord
	// loading holds the registered plugins not loaded yet since the
	// start, each with a channel closed when its load ends; notLoaded
	// the ones whose load failed, with why.
	loading   map[string]chan struct{}
	notLoaded map[string]string
	loaded    chan struct{} // closed when the loader is done
	stopLoad  context.CancelFunc
	draining  <-chan struct{} // closed when the node's shutdown begins
	closing   bool            // under mu: no more background work
	bg        sync.WaitGroup  // the loader and quarantine writes

	// BeforePolicyCommit, when set, runs between a policy's proposal and
	// its commit (tests make the poll stale there); Awaiting, when set,
	// runs as a poll or a commit policy starts waiting for a plugin still
	// loading (tests stop the node there).
	BeforePolicyCommit atomic.Pointer[func()]
	Awaiting           atomic.Pointer[func(name string)]
}

// Config is what the registry needs of the node's configuration.
type Config struct {
	Plugins plugins.Config
	FS      vfs.FS
	DataDir string
	Logger  *slog.Logger
	Now     func() time.Time
}

// Open reads the plugin registry. It loads no plugin: the node calls
// StartLoading once it listens.
func Open(cfg Config, meta owner.Metadata) (*Registry, error) {
	pc := cfg.Plugins
	if pc.Logger == nil {
		pc.Logger = cfg.Logger.With("component", "plugins")
	}
	if pc.CacheDir == "" && diskBacked(cfg.FS) {
		pc.CacheDir = filepath.Join(cfg.DataDir, CacheDir)
	}
	reg := &Registry{
		cfg: pc, fs: cfg.FS, dir: filepath.Join(cfg.DataDir, Dir), meta: meta, log: cfg.Logger, now: cfg.Now,
		records: map[string]pluginRecord{}, policies: map[string]policyRecord{},
		loading: map[string]chan struct{}{}, notLoaded: map[string]string{}, loaded: make(chan struct{}),
	}
	err := meta.Scan(keyPlugins, func(k, v []byte) error {
		var rec pluginRecord
		if err := json.Unmarshal(v, &rec); err != nil || rec.V != pluginRecordVersion {
			return fmt.Errorf("pluginreg: plugin %q: unreadable record (version %d): %v", k[len(keyPlugins):], rec.V, err)
		}
		if !rec.Removed {
			name := string(k[len(keyPlugins):])
			reg.records[name] = rec
			reg.loading[name] = make(chan struct{})
		}
		return nil
	})
	if err == nil {
		err = meta.Scan(keyPolicies, func(k, v []byte) error {
			var rec policyRecord
			if err := json.Unmarshal(v, &rec); err != nil || rec.V != pluginRecordVersion {
				return fmt.Errorf("pluginreg: policy of %q: unreadable record: %v", k[len(keyPolicies):], err)
			}
			if rec.Plugin != "" {
				reg.policies[string(k[len(keyPolicies):])] = rec
			}
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	return reg, nil
}

// diskBacked reports whether fs is the operating system's file system,
// possibly behind wrappers that say what they wrap (an Unwrap method, as
// the node's metered file system has): the compilation cache is written
// by the runtime with the operating system's calls, so it is used only
// when the node's files really are on disk.
func diskBacked(fs vfs.FS) bool {
	for fs != nil {
		if fs == vfs.Default {
			return true
		}
		u, ok := fs.(interface{ Unwrap() vfs.FS })
		if !ok {
			return false
		}
		fs = u.Unwrap()
	}
	return false
}

// Host returns the plugin host, nil until the first plugin is added or
// loaded.
func (reg *Registry) Host() *plugins.Host { return reg.host.Load() }

// hostLocked returns the host, creating it if need be. Called with
// reg.adminMu held, or before the registry is shared.
func (reg *Registry) hostLocked(ctx context.Context) (*plugins.Host, error) {
	if h := reg.host.Load(); h != nil {
		return h, nil
	}
	h, err := plugins.NewHost(ctx, reg.cfg)
	if err != nil {
		return nil, fmt.Errorf("pluginreg: plugin host: %w", err)
	}
	h.OnQuarantine(reg.quarantined)
	reg.host.Store(h)
	return h, nil
}

// Close stops the loader, waits for the quarantines being recorded, and
// closes the host.
func (reg *Registry) Close(ctx context.Context) error {
	if reg == nil {
		return nil
	}
	reg.mu.Lock()
	reg.closing = true
	stop := reg.stopLoad
	reg.mu.Unlock()
	if stop != nil {
		stop()
	}
	reg.bg.Wait()
	if h := reg.host.Load(); h != nil {
		return h.Close(ctx)
	}
	return nil
}

// Stat describes the plugin called name.
func (reg *Registry) Stat(name string) (plugins.Info, error) {
	if h := reg.host.Load(); h != nil {
		return h.Stat(name)
	}
	return plugins.Info{}, fmt.Errorf("%w: %q", plugins.ErrUnknownPlugin, name)
}

func (reg *Registry) modulePath(digest string) string {
	return filepath.Join(reg.dir, digest+".wasm")
}

// readModule reads a stored module and checks it against its digest.
func (reg *Registry) readModule(digest string) ([]byte, error) {
	f, err := reg.fs.Open(reg.modulePath(digest))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	wasm, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(wasm); fmt.Sprintf("%x", sum) != digest {
		return nil, fmt.Errorf("pluginreg: stored module %s does not match its digest", digest)
	}
	return wasm, nil
}

// storeModule writes wasm under its digest crash-safely: a temporary file,
// fsync, rename, fsync of the directory. An existing copy is kept.
func (reg *Registry) storeModule(digest string, wasm []byte) error {
	path := reg.modulePath(digest)
	if _, err := reg.readModule(digest); err == nil {
		return nil
	}
	if err := reg.fs.MkdirAll(reg.dir, 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := reg.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	// Write may modify its argument: hand it a copy.
	_, err = f.Write(bytes.Clone(wasm))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = reg.fs.Rename(tmp, path)
	}
	if err != nil {
		_ = reg.fs.Remove(tmp)
		return fmt.Errorf("pluginreg: storing plugin module: %w", err)
	}
	return reg.syncDir()
}

func (reg *Registry) syncDir() error {
	d, err := reg.fs.OpenDir(reg.dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (reg *Registry) putRecord(ctx context.Context, key []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	t, err := reg.meta.Put(key, b)
	if err != nil {
		return err
	}
	return reg.meta.Sync(ctx, t)
}

// Add stores and registers a plugin, replacing one of the same name. The
// module is compiled (by the host) before anything is recorded, so a
// module that does not load leaves no trace.
func (reg *Registry) Add(ctx context.Context, name string, kind plugins.Kind, wasm []byte) (plugins.Info, error) {
	reg.adminMu.Lock()
	defer reg.adminMu.Unlock()
	host, err := reg.hostLocked(ctx)
	if err != nil {
		return plugins.Info{}, err
	}
	digest, err := host.Add(ctx, name, kind, wasm)
	if err != nil {
		return plugins.Info{}, err
	}
	// Until the record is durable the registration is the old one (or
	// none): a failure puts the host back in that state.
	restore := func() {
		reg.mu.RLock()
		old, had := reg.records[name]
		reg.mu.RUnlock()
		if had {
			if w, err := reg.readModule(old.Digest); err == nil {
				if _, err := host.Add(ctx, name, plugins.Kind(old.Kind), w); err == nil {
					return
				}
			}
		}
		_ = host.Remove(name)
	}
	hex := digest.String()
	if err := reg.storeModule(hex, wasm); err != nil {
		restore()
		return plugins.Info{}, err
	}
	info, _ := host.Stat(name)
	info.Added = reg.now()
	// A new record: whatever quarantine the name had is gone with it.
	rec := pluginRecord{V: pluginRecordVersion, Kind: uint8(kind), Digest: hex, Added: info.Added}
	if err := reg.putRecord(ctx, append(slices.Clone(keyPlugins), name...), rec); err != nil {
		restore()
		return plugins.Info{}, err
	}
	reg.mu.Lock()
	old, had := reg.records[name]
	reg.records[name] = rec
	reg.doneLoadingLocked(name, "")
	reg.mu.Unlock()
	if had && old.Digest != hex {
		reg.dropModuleIfUnused(old.Digest)
	}
	return info, nil
}

// Remove unregisters a plugin and deletes its module once no other
// plugin uses it.
func (reg *Registry) Remove(ctx context.Context, name string) error {
	reg.adminMu.Lock()
	defer reg.adminMu.Unlock()
	reg.mu.RLock()
	rec, ok := reg.records[name]
	reg.mu.RUnlock()
	if !ok {
		return fmt.Errorf("%w: %q", plugins.ErrUnknownPlugin, name)
	}
	tomb := pluginRecord{V: pluginRecordVersion, Kind: rec.Kind, Digest: rec.Digest, Added: rec.Added, Removed: true}
	if err := reg.putRecord(ctx, append(slices.Clone(keyPlugins), name...), tomb); err != nil {
		return err
	}
	reg.mu.Lock()
	delete(reg.records, name)
	reg.doneLoadingLocked(name, "")
	delete(reg.notLoaded, name)
	reg.mu.Unlock()
	if h := reg.host.Load(); h != nil {
		if err := h.Remove(name); err != nil && !errors.Is(err, plugins.ErrUnknownPlugin) {
			return err
		}
	}
	reg.dropModuleIfUnused(rec.Digest)
	return nil
}

// dropModuleIfUnused removes a module file no registration names. Called
// with reg.adminMu held, after the record naming it changed durably.
func (reg *Registry) dropModuleIfUnused(digest string) {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	for _, r := range reg.records {
		if r.Digest == digest {
			return
		}
	}
	if err := reg.fs.Remove(reg.modulePath(digest)); err != nil {
		reg.log.Warn("removing an unused plugin module", "digest", digest, "err", err)
	}
}

// CheckPolicy resolves a policy as set-policy names it: a commit policy
// plugin the node has, with its parameters (an empty name detaches).
func (reg *Registry) CheckPolicy(policy wire.Filter) (policyRecord, error) {
	params, err := paramsOf(policy.Params)
	if err != nil {
		return policyRecord{}, err
	}
	if policy.Name != "" {
		if reg == nil {
			return policyRecord{}, fmt.Errorf("%w: %q: this node runs no plugins", plugins.ErrUnknownPlugin, policy.Name)
		}
		info, err := reg.Stat(policy.Name)
		if err != nil {
			return policyRecord{}, err
		}
		if info.Kind != plugins.KindCommitPolicy {
			return policyRecord{}, fmt.Errorf("%w: %q is a %s, not a commit policy", plugins.ErrWrongKind, policy.Name, info.Kind)
		}
	}
	return policyRecord{V: pluginRecordVersion, Plugin: policy.Name, Params: params}, nil
}

// SetPolicy attaches a commit policy to a named consumer (or detaches it
// when policy.Name is empty).
func (reg *Registry) SetPolicy(ctx context.Context, consumer string, policy wire.Filter) error {
	reg.adminMu.Lock()
	defer reg.adminMu.Unlock()
	rec, err := reg.CheckPolicy(policy)
	if err != nil {
		return err
	}
	if err := reg.putRecord(ctx, append(slices.Clone(keyPolicies), consumer...), rec); err != nil {
		return err
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if policy.Name == "" {
		delete(reg.policies, consumer)
	} else {
		reg.policies[consumer] = rec
	}
	return nil
}

func (reg *Registry) PolicyOf(consumer string) (policyRecord, bool) {
	if reg == nil {
		return policyRecord{}, false
	}
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	p, ok := reg.policies[consumer]
	return p, ok
}

func paramsOf(ps []wire.FilterParam) (plugins.Params, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	out := make(plugins.Params, len(ps))
	for _, p := range ps {
		if _, dup := out[p.Key]; dup {
			return nil, fmt.Errorf("%w: %q given twice", plugins.ErrBadParams, p.Key)
		}
		out[p.Key] = p.Value
	}
	return out, nil
}

func InfoToWire(i plugins.Info) wire.PluginInfo {
	w := wire.PluginInfo{
		Name: i.Name, Kind: wire.PluginKind(i.Kind), Digest: i.Digest, Size: uint32(i.Size), Added: i.Added,
		Calls: i.Stats.Calls, Failures: i.Stats.Failures, RecordsIn: i.Stats.RecordsIn, RecordsOut: i.Stats.RecordsOut,
		CallTime: i.Stats.CallTime, Timeouts: i.Stats.Timeouts, Traps: i.Stats.Traps,
		InvalidAnswers: i.Stats.InvalidAnswers, MemoryPages: i.Stats.MemoryPages, Quarantined: i.Stats.Quarantined,
	}
	if i.Stats.Quarantined {
		w.State, w.Reason = wire.PluginQuarantined, i.Stats.QuarantineReason
	}
	return w
}
