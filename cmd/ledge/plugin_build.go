package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"
)

func newPluginBuildCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "build [DIR]",
		Short: "Build a plugin project (from ledge plugin init) into its .wasm module",
		Long: `Build the plugin project in DIR (default: the current directory) into the
module its ledge-plugin.json names:

  go              GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build -buildmode=c-shared
                  (a WASI reactor, as the node requires)
  assemblyscript  npm install (once: the project's own copy of the compiler),
                  then npm run build (asc with --runtime stub and its own abort)
  wat             wat2wasm (Debian: apt-get install wabt)`,
		Example: `  ledge plugin build only-errors
  cd only-errors && ledge plugin build`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			p, err := loadProject(dir)
			if err != nil {
				return err
			}
			if err := p.build(cmd.Context(), cmd.ErrOrStderr()); err != nil {
				return err
			}
			st, err := os.Stat(p.wasmPath())
			if err != nil {
				return fmt.Errorf("the build wrote no %s: %v", p.wasmPath(), err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "built %s (%s)\n", p.wasmPath(), formatBytes(st.Size()))
			return nil
		},
	}
}

// build runs the project's toolchain; its output goes to log.
func (p *pluginProject) build(ctx context.Context, log io.Writer) error {
	run := func(env []string, name string, args ...string) error {
		bin, err := exec.LookPath(name)
		if err != nil {
			return fmt.Errorf("building a %s plugin needs %s, which is not on the PATH: %s", pluginLangs[p.Lang], name, installHint(name))
		}
		c := exec.CommandContext(ctx, bin, args...)
		c.Dir, c.Stdout, c.Stderr = p.dir, log, log
		c.Env = append(os.Environ(), env...)
		if err := c.Run(); err != nil {
			return fmt.Errorf("%s %v failed in %s (%v): its output is above", name, args, p.dir, err)
		}
		return nil
	}
	switch p.Lang {
	case "go":
		return run([]string{"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0"},
			"go", "build", "-buildmode=c-shared", "-trimpath", "-o", p.Wasm, ".")
	case "assemblyscript":
		if _, err := os.Stat(filepath.Join(p.dir, "node_modules", ".bin", "asc")); err != nil {
			if err := run(nil, "npm", "install", "--no-audit", "--no-fund"); err != nil {
				return err
			}
		}
		return run(nil, "npm", "run", "--silent", "build")
	case "wat":
		return run(nil, "wat2wasm", p.Name+".wat", "-o", p.Wasm)
	}
	return fmt.Errorf("no build for language %q", p.Lang)
}

func installHint(tool string) string {
	switch tool {
	case "wat2wasm":
		return "install WABT (Debian: apt-get install wabt)"
	case "npm", "node":
		return "install Node.js and npm (Debian: apt-get install nodejs npm)"
	case "go":
		return "install Go 1.26 or later"
	}
	return "install it"
}
