//go:build !wasip1

package abi

import (
	"embed"
	"io/fs"
)

//go:embed *.go
var source embed.FS

// Source returns this package's Go files, for `ledge plugin init` to
// write beside a new Go plugin project with the kit (sdk/plugin) that
// imports this package, so that the project builds offline. Guests
// (GOOS=wasip1) do not build this file.
func Source() fs.FS { return source }
