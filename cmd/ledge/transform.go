package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/sdk"
	"github.com/spf13/cobra"
)

func newTransformCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "transform",
		Short: "Run a transform plugin from one topic to another, exactly once",
		Long: `A transform reads a topic, calls a transform plugin (ledge plugin add NAME
FILE --kind transform) on each batch of records with the state the plugin
answered on the previous batch, and appends what the plugin outputs to
another topic. The node runs it as a member of an internal consumer group
(__transform.NAME), and its outputs, its state and its input offset move
together: every record's outputs are in the output topic exactly once,
through crashes, power loss (with the output topic's durability always),
plugin failures and restarts (docs/PIPELINES.md). The outputs of input
partition p go to output partition p mod n, in input order. A plugin that
fails leaves the input where it was; 'ledge transform status' says how it
failed. Managing transforms needs the admin scope on both topics.`,
		Example: `  ledge plugin add perminute perminute.wasm --kind transform
  ledge transform add minutes --plugin perminute --from readings --to per-minute --param key=site
  ledge transform list
  ledge transform status minutes
  ledge transform pause minutes
  ledge transform resume minutes
  ledge transform remove minutes`,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newTransformAddCommand(cf), newTransformListCommand(cf), newTransformStatusCommand(cf),
		newTransformNameCommand(cf, "pause", "Stop a transform until it is resumed (across restarts too)", "paused",
			func(c *sdk.Client, cmd *cobra.Command, name string) error {
				return c.PauseTransform(cmd.Context(), name)
			}),
		newTransformNameCommand(cf, "resume", "Start a paused transform where it stopped", "resumed",
			func(c *sdk.Client, cmd *cobra.Command, name string) error {
				return c.ResumeTransform(cmd.Context(), name)
			}),
		newTransformNameCommand(cf, "remove", "Stop and forget a transform and its progress (its outputs stay)", "removed",
			func(c *sdk.Client, cmd *cobra.Command, name string) error {
				return c.RemoveTransform(cmd.Context(), name)
			}))
	return cmd
}

func newTransformAddCommand(cf *clientFlags) *cobra.Command {
	var (
		cfg    sdk.TransformConfig
		params []string
	)
	cmd := &cobra.Command{
		Use:     "add NAME --plugin P --from SRC --to DST [--param k=v]...",
		Example: "  ledge transform add copy --plugin pass --from raw --to clean\n  ledge transform add minutes --plugin perminute --from readings --to per-minute --param key=site",
		Short:   "Add and start a transform from topic SRC to topic DST through plugin P",
		Long: `Add transform NAME: every record of SRC, from its first, goes through the
transform plugin P (with its --param values), and the outputs are appended
to DST. Both topics must exist; the plugin must be of kind transform.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pp, err := plugins.ParseParams(params)
			if err != nil {
				return fmt.Errorf("--param: %w", err)
			}
			if len(pp) > 0 {
				cfg.Params = pp
			}
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				if err := c.AddTransform(ctx, args[0], cfg); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "transform %s: %s -> %s through %s%s added\n", args[0], cfg.From, cfg.To, cfg.Plugin, paramsString(cfg.Params))
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Plugin, "plugin", "", "the transform plugin")
	f.StringVar(&cfg.From, "from", "", "the input topic")
	f.StringVar(&cfg.To, "to", "", "the output topic")
	f.StringArrayVar(&params, "param", nil, "a plugin parameter, key=value (repeat)")
	_ = cmd.MarkFlagRequired("plugin")
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

func newTransformListCommand(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Example: "  ledge transform list\n  ledge transform list --json",
		Short:   "List transforms with their lag and records in and out",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				ts, err := c.ListTransforms(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(ts)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tPLUGIN\tFROM\tTO\tLAG\tIN\tOUT\tPLUGIN FAILURES\tSTATE")
				for _, t := range ts {
					var lag, in, out, pf uint64
					for _, p := range t.Partitions {
						lag, in, out, pf = lag+p.Lag, in+p.RecordsIn, out+p.RecordsOut, pf+p.PluginFailures
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", t.Name, t.Config.Plugin, t.Config.From, t.Config.To,
						lag, in, out, pf, transformState(t))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// transformState is paused, stopped (an error keeps it from running),
// failing (a partition's last step failed) or running.
func transformState(t sdk.Transform) string {
	switch {
	case t.Paused:
		return "paused"
	case t.Error != "":
		return "stopped"
	}
	for _, p := range t.Partitions {
		if p.LastError != "" {
			return "failing"
		}
	}
	return "running"
}

func newTransformStatusCommand(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "status NAME",
		Example: "  ledge transform status minutes",
		Short:   "Show a transform's partitions: committed input, lag, records in and out, failures",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				t, err := c.TransformStatus(ctx, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(t)
				}
				return printTransformStatus(cmd.OutOrStdout(), t)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printTransformStatus prints a transform's partitions, then each
// partition's latest failure as the node said it.
func printTransformStatus(out io.Writer, t sdk.Transform) error {
	fmt.Fprintf(out, "transform %s: %s -> %s through %s%s, %s\n", t.Name, t.Config.From, t.Config.To, t.Config.Plugin,
		paramsString(t.Config.Params), transformState(t))
	if t.Error != "" {
		fmt.Fprintf(out, "not running: %s\n", t.Error)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tRUNNING\tCOMMITTED\tHIGH WATERMARK\tLAG\tIN\tOUT\tPLUGIN FAILURES\tERRORS")
	for _, p := range t.Partitions {
		fmt.Fprintf(tw, "%d\t%t\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", p.Partition, p.Running, p.Committed, p.HighWatermark,
			p.Lag, p.RecordsIn, p.RecordsOut, p.PluginFailures, p.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range t.Partitions {
		if p.LastError != "" {
			fmt.Fprintf(out, "partition %d failed at %s (input kept at %d, retrying): %s\n", p.Partition,
				p.LastErrorAt.UTC().Format(time.RFC3339), p.Committed, p.LastError)
		}
	}
	return nil
}

func newTransformNameCommand(cf *clientFlags, verb, short, done string, do func(*sdk.Client, *cobra.Command, string) error) *cobra.Command {
	return &cobra.Command{
		Use:     verb + " NAME",
		Example: "  ledge transform " + verb + " minutes",
		Short:   short,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "" {
				return errors.New("name the transform")
			}
			return cf.with(cmd.Context(), func(c *sdk.Client) error {
				if err := do(c, cmd, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "transform %s %s\n", args[0], done)
				return nil
			})
		},
	}
}

// printStatusTransforms is the transforms' part of ledge status: one line
// per transform with its totals (nothing when there is none).
func printStatusTransforms(w io.Writer, ts []ops.TransformStatus) error {
	if len(ts) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSFORM	FROM	TO	PLUGIN	STATE	LAG	IN	OUT	PLUGIN FAILURES")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", t.Name, t.From, t.To, t.Plugin, t.State,
			t.Lag, t.RecordsIn, t.RecordsOut, t.PluginFailures)
	}
	return tw.Flush()
}
