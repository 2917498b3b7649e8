package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/sdk"
)

// The plugin registry of a node: "ledge plugin add", "list", "remove" and
// "reset". They need a token with the admin scope.

func newPluginAddCommand() *cobra.Command {
	var kind string
	cmd := &cobra.Command{
		Use:   "add NAME FILE.wasm",
		Short: "Register a plugin on the node (needs the admin scope)",
		Long: `Send a WebAssembly module to the node and register it under NAME as a filter,
a commit policy or a transform, replacing a plugin of that name. The node
compiles it before it answers and keeps it across restarts.`,
		Example: `  ledge plugin add site jsonfilter.wasm --kind filter
  ledge plugin add checkpoint checkpoint.wasm --kind commit-policy
  ledge plugin add perminute perminute.wasm --kind transform`,
		Args: cobra.ExactArgs(2),
	}
	cf := addClientFlags(cmd)
	cmd.Flags().StringVar(&kind, "kind", "filter", "plugin kind: filter, commit-policy or transform")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		k, err := plugins.ParseKind(kind)
		if err != nil {
			return err
		}
		wasm, err := os.ReadFile(args[1])
		if err != nil {
			return moduleReadError(args[1], err)
		}
		ctx := cmd.Context()
		c, err := cf.dial(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		info, err := c.AddPlugin(ctx, args[0], sdk.PluginKind(k), wasm)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "added %s (%s, %s, sha256 %s)\n", info.Name, info.Kind, formatBytes(int64(info.Size)), info.Digest)
		return nil
	}
	return cmd
}

// moduleReadError says which module file plugin add could not read, and
// where a project's module is.
func moduleReadError(path string, err error) error {
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the module %s does not exist: give the path of a .wasm file (ledge plugin build NAME writes NAME/NAME.wasm)", path)
	case errors.As(err, &pathErr):
		return fmt.Errorf("could not read the module %s: %v", path, pathErr.Err)
	}
	return fmt.Errorf("could not read the module %s: %v", path, err)
}

func newPluginListCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the node's plugins with their counters (needs the admin scope)",
		Example: `  ledge plugin list`,
		Args:    cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		c, err := cf.dial(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		list, err := c.ListPlugins(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tKIND\tSIZE\tDIGEST\tADDED\tCALLS\tIN\tOUT\tFAILURES\tTIMEOUTS\tTRAPS\tSTATE")
		var why []string
		for _, p := range list {
			fmt.Fprintf(w, "%s\t%s\t%s\t%.12s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", p.Name, p.Kind, formatBytes(int64(p.Size)), p.Digest,
				p.Added.Local().Format(time.DateTime), p.Calls, p.RecordsIn, p.RecordsOut, p.Failures, p.Timeouts, p.Traps, p.State)
			if p.Reason != "" {
				why = append(why, fmt.Sprintf("%s %s: %s", p.Name, p.State, p.Reason))
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		// Reasons are long: each on a line of its own, under the table.
		for _, line := range why {
			fmt.Fprintln(cmd.OutOrStdout(), line)
		}
		return nil
	}
	return cmd
}

func newPluginRemoveCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "remove NAME",
		Short:   "Remove a plugin from the node (needs the admin scope)",
		Example: `  ledge plugin remove site`,
		Args:    cobra.ExactArgs(1),
	}
	cf := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		c, err := cf.dial(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.RemovePlugin(ctx, args[0]); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", args[0])
		return nil
	}
	return cmd
}

func newPluginResetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reset NAME",
		Short: "Clear a plugin's quarantine (needs the admin scope)",
		Long: `A plugin that timed out, trapped or answered nonsense too often is
quarantined: polls naming it fail with "plugin quarantined" and the reason,
across restarts of the node, until an operator clears it with this command
(or adds its module again). The reset clears its strikes too.`,
		Example: `  ledge plugin reset site`,
		Args:    cobra.ExactArgs(1),
	}
	cf := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		c, err := cf.dial(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		info, err := c.ResetPlugin(ctx, args[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "reset %s (%s)\n", info.Name, info.State)
		return nil
	}
	return cmd
}

// pluginConsumeOptions maps consume's --filter, --commit-policy and
// --param to consumer options. Parameters go to the filter, or to the
// commit policy when there is no filter.
func pluginConsumeOptions(f *consumeFlags) ([]sdk.ConsumerOption, error) {
	params, err := plugins.ParseParams(f.params)
	if err != nil {
		return nil, fmt.Errorf("--param: %w", err)
	}
	var opts []sdk.ConsumerOption
	switch {
	case f.filter == "" && f.policy == "" && len(params) > 0:
		return nil, fmt.Errorf("--param needs --filter or --commit-policy")
	case f.filter != "" && f.policy != "" && len(params) > 0:
		return nil, fmt.Errorf("--param is ambiguous with both --filter and --commit-policy; attach the policy with its parameters first")
	case f.policy != "" && f.consumer == "":
		return nil, fmt.Errorf("--commit-policy needs --consumer NAME")
	}
	if f.filter != "" {
		opts = append(opts, sdk.WithFilter(f.filter, params))
	}
	if f.policy != "" {
		pp := params
		if f.filter != "" {
			pp = nil
		}
		opts = append(opts, sdk.WithCommitPolicy(f.policy, pp))
	}
	return opts, nil
}
