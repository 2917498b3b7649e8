package main

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/ledgemq/ledge/plugins/abi"
	"github.com/ledgemq/ledge/sdk/plugin"
)

// A project from "ledge plugin init" carries the kit it builds against,
// copied from this binary, so that it builds and tests offline, anywhere,
// against the very ABI of the node that wrote it:
//
//   - Go: the kit's source (sdk/plugin and plugins/abi, the only package
//     it imports, both standard library only) as a module in kitDir, and
//     a replace directive to it in the project's go.mod. A replace keeps
//     the project an ordinary module whose kit is readable beside it and
//     that needs no go.sum entry; a vendor directory would be ignored
//     under -mod=mod and rewritten by go mod vendor, which would need the
//     network.
//   - AssemblyScript: the library mirroring the Go kit, in
//     assembly/ledge.ts. Only the compiler comes from npm.
//
// Inside a checkout of Ledge (or with LEDGE_SOURCE), a Go project builds
// against the checkout instead, and no copy is written.

// kitDir is where a Go project's copy of the kit goes.
const kitDir = "ledge-sdk"

// kitNote heads every file of the copy.
const kitNote = "Written by ledge plugin init from the ledge binary: the plugin kit of the node that wrote it. Replace it with a newer binary's (ledge plugin init in an empty directory), not by hand."

// writeKit writes the kit a project of p's language builds against.
func (p *pluginProject) writeKit(dir string, data templateData) error {
	switch {
	case p.Lang == "go" && data.LedgeSource == "./"+kitDir:
		root := filepath.Join(dir, kitDir)
		mod := fmt.Sprintf("// %s\n\nmodule github.com/ledgemq/ledge\n\ngo %s\n", kitNote, data.GoVersion)
		if err := writeFile(filepath.Join(root, "go.mod"), []byte(mod)); err != nil {
			return err
		}
		if err := copyGoFiles(plugin.Source(), ".", filepath.Join(root, "sdk", "plugin")); err != nil {
			return err
		}
		return copyGoFiles(abi.Source(), ".", filepath.Join(root, "plugins", "abi"))
	case p.Lang == "assemblyscript":
		b, err := fs.ReadFile(plugin.Source(), "assemblyscript/ledge.ts")
		if err != nil {
			return err
		}
		return writeFile(filepath.Join(dir, "assembly", "ledge.ts"), b)
	}
	return nil
}

// copyGoFiles copies the Go files of dir in from to the directory to,
// leaving out tests and the files that embed the source itself.
func copyGoFiles(from fs.FS, dir, to string) error {
	entries, err := fs.ReadDir(from, dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || name == "source.go" {
			continue
		}
		b, err := fs.ReadFile(from, path.Join(dir, name))
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(to, name), b); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(name string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	return os.WriteFile(name, b, 0o644)
}
