//go:build !wasip1

package plugin

import (
	"bytes"
	"fmt"
	"os"

	"github.com/ledgemq/ledge/plugins/abi"
)

// Native builds: the host's functions as plain Go, the same code the host
// runs, so a plugin's go test sees what the node would do.

// Log logs msg to the node's log, tagged with the plugin's name. The host
// bounds what one call may log. In a native build it writes to standard
// error.
func Log(level Level, msg string) {
	name := map[Level]string{LevelDebug: "DEBUG", LevelInfo: "INFO", LevelWarn: "WARN", LevelError: "ERROR"}[level]
	fmt.Fprintf(os.Stderr, "plugin %s: %s\n", name, msg)
}

// NativeIndex returns the index of the first needle in hay, or -1, searched
// by the host.
func NativeIndex(hay, needle []byte) int { return bytes.Index(hay, needle) }

// NativeJSONField is JSONField computed by the host: one host call per
// lookup, the scan in native code.
func NativeJSONField(doc []byte, path string) ([]byte, bool) { return abi.JSONField(doc, path) }

// NativeMatchJSON keeps, in keep, each record of b whose value is a JSON
// object with a member at path equal to want (JSONValueEquals), drops the
// others, and returns how many it kept: the whole batch in one host call.
// b must be the batch of the current call.
func NativeMatchJSON(b *Batch, path, want string, keep Bitmap) int {
	return abi.MatchJSON(&b.v, path, []byte(want), keep)
}

// NativeMatchContains keeps, in keep, each record of b whose value
// contains needle, drops the others, and returns how many it kept: the
// whole batch in one host call. b must be the batch of the current call.
func NativeMatchContains(b *Batch, needle []byte, keep Bitmap) int {
	return abi.MatchContains(&b.v, needle, keep)
}
