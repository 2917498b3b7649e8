package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit are set at link time:
//
//	go build -ldflags "-X main.version=v0.1.0 -X main.commit=$(git rev-parse HEAD)" ./cmd/ledge
//
// When they are not set, the build information embedded by the Go toolchain
// fills them in where it can.
var (
	version = "dev"
	commit  = ""
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "ledge",
		Short:         "Ledge: a WebAssembly-pluggable message node for the edge",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand())
	root.AddCommand(newPluginCommand())
	root.AddCommand(newServeCommand())
	root.AddCommand(newStatusCommand())
	root.AddCommand(newTopicCommand())
	root.AddCommand(newProduceCommand())
	root.AddCommand(newConsumeCommand())
	root.AddCommand(newTokenCommand())
	root.AddCommand(newBenchCommand())
	root.AddCommand(newGroupCommand())
	root.AddCommand(newUplinkCommand())
	root.AddCommand(newStateCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version, commit and Go version of this binary",
		Example: "  ledge version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, c := buildVersion()
			fmt.Fprintf(cmd.OutOrStdout(), "ledge %s (commit %s, %s %s/%s)\n", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// buildVersion returns the version and commit of this binary, preferring the
// values set at link time and falling back to the toolchain's build info.
func buildVersion() (ver, rev string) {
	ver, rev = version, commit
	info, ok := debug.ReadBuildInfo()
	if !ok {
		if rev == "" {
			rev = "unknown"
		}
		return ver, rev
	}
	if ver == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		ver = info.Main.Version
	}
	if rev == "" {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	return ver, rev
}
