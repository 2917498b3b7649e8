package plugins

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ledgemq/ledge/plugins/abi"
)

const (
	hostModuleName = abi.HostModule
	wasiModuleName = abi.WASIModule
)

// hostFuncTypes are the host's own functions a plugin may import, with
// their types (docs/PLUGINS.md, "Host functions").
var hostFuncTypes = map[string]funcType{
	"log":            sig(valI32, valI32, valI32)(),
	"error":          sig(valI32, valI32)(),
	"index":          sig(valI32, valI32, valI32, valI32)(valI32),
	"json_get":       sig(valI32, valI32, valI32, valI32)(valI64),
	"match_json":     sig(valI32, valI32, valI32, valI32, valI32)(valI32),
	"match_contains": sig(valI32, valI32, valI32)(valI32),
}

// wasiFuncTypes is the whole of wasi_snapshot_preview1 with its types. The
// host provides all of it so that standard toolchains' guests link, but
// with no file system, no network, a virtual clock and seeded randomness
// (wasi.go): most functions answer EBADF or ENOSYS.
var wasiFuncTypes = map[string]funcType{
	"args_get":                sig(valI32, valI32)(valI32),
	"args_sizes_get":          sig(valI32, valI32)(valI32),
	"environ_get":             sig(valI32, valI32)(valI32),
	"environ_sizes_get":       sig(valI32, valI32)(valI32),
	"clock_res_get":           sig(valI32, valI32)(valI32),
	"clock_time_get":          sig(valI32, valI64, valI32)(valI32),
	"fd_advise":               sig(valI32, valI64, valI64, valI32)(valI32),
	"fd_allocate":             sig(valI32, valI64, valI64)(valI32),
	"fd_close":                sig(valI32)(valI32),
	"fd_datasync":             sig(valI32)(valI32),
	"fd_fdstat_get":           sig(valI32, valI32)(valI32),
	"fd_fdstat_set_flags":     sig(valI32, valI32)(valI32),
	"fd_fdstat_set_rights":    sig(valI32, valI64, valI64)(valI32),
	"fd_filestat_get":         sig(valI32, valI32)(valI32),
	"fd_filestat_set_size":    sig(valI32, valI64)(valI32),
	"fd_filestat_set_times":   sig(valI32, valI64, valI64, valI32)(valI32),
	"fd_pread":                sig(valI32, valI32, valI32, valI64, valI32)(valI32),
	"fd_prestat_get":          sig(valI32, valI32)(valI32),
	"fd_prestat_dir_name":     sig(valI32, valI32, valI32)(valI32),
	"fd_pwrite":               sig(valI32, valI32, valI32, valI64, valI32)(valI32),
	"fd_read":                 sig(valI32, valI32, valI32, valI32)(valI32),
	"fd_readdir":              sig(valI32, valI32, valI32, valI64, valI32)(valI32),
	"fd_renumber":             sig(valI32, valI32)(valI32),
	"fd_seek":                 sig(valI32, valI64, valI32, valI32)(valI32),
	"fd_sync":                 sig(valI32)(valI32),
	"fd_tell":                 sig(valI32, valI32)(valI32),
	"fd_write":                sig(valI32, valI32, valI32, valI32)(valI32),
	"path_create_directory":   sig(valI32, valI32, valI32)(valI32),
	"path_filestat_get":       sig(valI32, valI32, valI32, valI32, valI32)(valI32),
	"path_filestat_set_times": sig(valI32, valI32, valI32, valI32, valI64, valI64, valI32)(valI32),
	"path_link":               sig(valI32, valI32, valI32, valI32, valI32, valI32, valI32)(valI32),
	"path_open":               sig(valI32, valI32, valI32, valI32, valI32, valI64, valI64, valI32, valI32)(valI32),
	"path_readlink":           sig(valI32, valI32, valI32, valI32, valI32, valI32)(valI32),
	"path_remove_directory":   sig(valI32, valI32, valI32)(valI32),
	"path_rename":             sig(valI32, valI32, valI32, valI32, valI32, valI32)(valI32),
	"path_symlink":            sig(valI32, valI32, valI32, valI32, valI32)(valI32),
	"path_unlink_file":        sig(valI32, valI32, valI32)(valI32),
	"poll_oneoff":             sig(valI32, valI32, valI32, valI32)(valI32),
	"proc_exit":               sig(valI32)(),
	"proc_raise":              sig(valI32)(valI32),
	"sched_yield":             sig()(valI32),
	"random_get":              sig(valI32, valI32)(valI32),
	"sock_accept":             sig(valI32, valI32, valI32)(valI32),
	"sock_recv":               sig(valI32, valI32, valI32, valI32, valI32, valI32)(valI32),
	"sock_send":               sig(valI32, valI32, valI32, valI32, valI32)(valI32),
	"sock_shutdown":           sig(valI32, valI32)(valI32),
}

// allowImport accepts exactly the host's functions and WASI preview 1,
// with their declared types, and refuses anything else by name.
func allowImport(module, name string, typ funcType) error {
	var table map[string]funcType
	switch module {
	case hostModuleName:
		table = hostFuncTypes
	case wasiModuleName:
		table = wasiFuncTypes
	default:
		return fmt.Errorf("%w: %q.%q: module %q is not provided (plugins may import from %q and %q only)",
			ErrImportRefused, module, name, module, hostModuleName, wasiModuleName)
	}
	want, ok := table[name]
	if !ok {
		return fmt.Errorf("%w: %q.%q: module %q has no function %q (it has %s)",
			ErrImportRefused, module, name, module, name, strings.Join(sortedKeys(table), ", "))
	}
	if !typ.equal(want) {
		return fmt.Errorf("%w: %q.%q has type %v, the host provides %v", ErrImportRefused, module, name, typ, want)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
