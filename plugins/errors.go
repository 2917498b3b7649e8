package plugins

import "errors"

// Errors of the plugin host. Each is wrapped with the plugin's name and
// the details; test with errors.Is.
var (
	// ErrInvalidModule: the bytes are not a usable WebAssembly module
	// (truncated, corrupt, too large, a missing or mistyped export, a
	// command instead of a reactor, the wrong ABI version). Not retryable:
	// rebuild the plugin.
	ErrInvalidModule = errors.New("plugins: invalid module")
	// ErrImportRefused: the module imports something the host does not
	// provide. Not retryable: plugins may import only the host's functions
	// and the restricted WASI (docs/PLUGINS.md lists them).
	ErrImportRefused = errors.New("plugins: import refused")
	// ErrCompileTimeout: compiling the module took longer than the limit.
	// Retryable only with a higher limit or a smaller module.
	ErrCompileTimeout = errors.New("plugins: compile time limit exceeded")
	// ErrUnknownPlugin: no plugin of that name. Retryable after adding it.
	ErrUnknownPlugin = errors.New("plugins: unknown plugin")
	// ErrWrongKind: the plugin is not of the kind the call needs (a
	// commit policy used as a filter, or the reverse). Not retryable.
	ErrWrongKind = errors.New("plugins: wrong plugin kind")
	// ErrQuarantined: the plugin failed too often and is disabled until it
	// is replaced (added again under its name). Not retryable.
	ErrQuarantined = errors.New("plugins: plugin quarantined")
	// ErrTimeout: a call ran past its deadline and was cut off; the
	// instance was discarded and a strike counted. Retryable, but a plugin
	// that keeps timing out is quarantined.
	ErrTimeout = errors.New("plugins: plugin call timed out")
	// ErrTrap: the plugin trapped (unreachable, out-of-bounds access, stack
	// overflow, a Go panic, exit). The instance was discarded and a strike
	// counted. Retryable as for ErrTimeout.
	ErrTrap = errors.New("plugins: plugin trapped")
	// ErrInvalidAnswer: the plugin answered outside the ABI (a bitmap of
	// the wrong size or with stray bits, a proposal outside the delivered
	// range, a buffer outside its memory). The instance was discarded and
	// a strike counted. Retryable as for ErrTimeout.
	ErrInvalidAnswer = errors.New("plugins: invalid plugin answer")
	// ErrPluginFailed: the plugin reported an error itself (a negative
	// result, with the message it gave through the host's error function),
	// for example a missing parameter. No strike. Retryable only if the
	// cause (parameters, input) changes.
	ErrPluginFailed = errors.New("plugins: plugin reported an error")
	// ErrInputTooLarge: the poll result does not fit the plugin input
	// limit. Retryable with a smaller poll (fewer bytes).
	ErrInputTooLarge = errors.New("plugins: input too large for a plugin call")
	// ErrBadParams: the parameters are malformed (an empty key, too many,
	// too large). Not retryable.
	ErrBadParams = errors.New("plugins: invalid plugin parameters")
	// ErrMemoryBudget: the node-wide plugin memory budget is held by
	// instances in use: no instance could be started within it before the
	// context ended, or a call's memory.grow was refused and the call
	// failed. No strike. Retryable: the memory comes back as calls end.
	ErrMemoryBudget = errors.New("plugins: plugin memory budget exhausted")
	// ErrMemoryLimit: the plugin grew its memory past the limit of one
	// instance (Config.MaxInstanceMemory); memory.grow failed inside the
	// call and the call then failed. The instance was discarded and a
	// strike counted. Not retryable with the same input.
	ErrMemoryLimit = errors.New("plugins: plugin memory limit exceeded")
	// ErrBusy: the call's context ended while it waited for one of the
	// host's workers (Config.MaxConcurrentCalls) or for an instance of its
	// plugin (Config.MaxInstances): none of its plugin code ran. No strike,
	// and not a failure of the plugin. Retryable: workers and instances
	// come back as the calls ahead of it end. The error also matches the
	// context's error.
	ErrBusy = errors.New("plugins: plugin busy")
	// ErrClosed: the host is closed. Not retryable.
	ErrClosed = errors.New("plugins: host closed")
)

// isGuestError reports whether err is a plugin's own error report.
func isGuestError(err error) bool { return errors.Is(err, ErrPluginFailed) }
