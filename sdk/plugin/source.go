//go:build !wasip1

package plugin

import (
	"embed"
	"io/fs"
)

// source is this package's Go files and the AssemblyScript kit.
//
//go:embed *.go assemblyscript/ledge.ts
var source embed.FS

// Source returns the kit's own source: this package's Go files (tests
// included; a copy leaves out what it does not need) and
// assemblyscript/ledge.ts, the AssemblyScript kit that mirrors it. `ledge
// plugin init` writes them beside a new project, so that the project
// builds with no network and no checkout of Ledge. It is not part of
// a plugin: guests (GOOS=wasip1) do not build this file.
func Source() fs.FS { return source }
