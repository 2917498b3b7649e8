package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/sdk"
	"github.com/spf13/cobra"
)

func newTopicCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, delete and purge topics",
		Long:  "Manage the topics of a node. Creating, deleting and purging need a token with the admin scope.",
		Example: `  ledge topic create orders --partitions 4 --durability always
  ledge topic list
  ledge topic describe orders
  ledge topic purge orders
  ledge topic delete orders`,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newTopicCreateCommand(cf), newTopicListCommand(cf), newTopicDescribeCommand(cf),
		newTopicDeleteCommand(cf), newTopicPurgeCommand(cf))
	return cmd
}

type topicCreateFlags struct {
	partitions     int
	durability     string
	syncInterval   time.Duration
	compression    string
	retentionAge   string
	retentionBytes string
	segmentBytes   string
	segmentAge     string
	timestamps     string
	maxBatchBytes  string
}

func (f *topicCreateFlags) config() (sdk.TopicConfig, error) {
	cfg := sdk.TopicConfig{Partitions: f.partitions, SyncInterval: f.syncInterval}
	if f.partitions < 1 {
		return cfg, fmt.Errorf("--partitions must be at least 1")
	}
	switch f.durability {
	case "always":
		cfg.Durability = sdk.DurabilityAlways
	case "interval":
		cfg.Durability = sdk.DurabilityInterval
	case "none":
		cfg.Durability = sdk.DurabilityNone
	default:
		return cfg, fmt.Errorf("--durability %q: want always, interval or none", f.durability)
	}
	c, err := record.ParseCompression(f.compression)
	if err != nil {
		return cfg, fmt.Errorf("--compression: %w", err)
	}
	cfg.Compression = c
	switch f.timestamps {
	case "producer":
		cfg.Timestamps = sdk.TimestampsProducer
	case "append":
		cfg.Timestamps = sdk.TimestampsAppend
	default:
		return cfg, fmt.Errorf("--timestamps %q: want producer or append", f.timestamps)
	}
	if cfg.RetentionAge, err = parseAge(f.retentionAge); err != nil {
		return cfg, fmt.Errorf("--retention-age: %w", err)
	}
	if cfg.SegmentAge, err = parseAge(f.segmentAge); err != nil {
		return cfg, fmt.Errorf("--segment-age: %w", err)
	}
	sizes := []struct {
		flag string
		val  string
		dst  *int64
	}{
		{"--retention-bytes", f.retentionBytes, &cfg.RetentionBytes},
		{"--segment-bytes", f.segmentBytes, &cfg.SegmentBytes},
	}
	for _, s := range sizes {
		if *s.dst, err = parseSize(s.val); err != nil {
			return cfg, fmt.Errorf("%s: %w", s.flag, err)
		}
	}
	mb, err := parseSize(f.maxBatchBytes)
	if err != nil {
		return cfg, fmt.Errorf("--max-batch-bytes: %w", err)
	}
	cfg.MaxBatchBytes = int(mb)
	return cfg, nil
}

func newTopicCreateCommand(cf *clientFlags) *cobra.Command {
	var f topicCreateFlags
	cmd := &cobra.Command{
		Use:   "create TOPIC",
		Short: "Create a topic",
		Long: `Create a topic and print its effective configuration.

A zero --retention-age and --retention-bytes keep records forever; zero
--segment-bytes, --segment-age, --sync-interval and --max-batch-bytes take
the node's defaults.`,
		Example: `  ledge topic create demo
  ledge topic create sensors --partitions 8 --durability interval --sync-interval 200ms \
      --compression zstd --retention-age 7d --retention-bytes 10GiB --timestamps append`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := f.config()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				info, err := c.CreateTopic(ctx, args[0], cfg)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "created topic %s (id %s)\n", info.Name, info.ID)
				printTopicConfig(cmd.OutOrStdout(), info.Config)
				return nil
			})
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&f.partitions, "partitions", 1, "number of partitions")
	fs.StringVar(&f.durability, "durability", "always", "when a produce is acknowledged: always (after fsync), interval (fsync every --sync-interval) or none (page cache)")
	fs.DurationVar(&f.syncInterval, "sync-interval", 0, "fsync interval of --durability interval (0: node default, 100ms)")
	fs.StringVar(&f.compression, "compression", "none", "codec producers use by default: none, s2 or zstd")
	fs.StringVar(&f.retentionAge, "retention-age", "0", "delete records older than this (e.g. 36h, 7d; 0 keeps them)")
	fs.StringVar(&f.retentionBytes, "retention-bytes", "0", "keep each partition under this size (e.g. 512MiB, 10GB; 0 = unlimited)")
	fs.StringVar(&f.segmentBytes, "segment-bytes", "0", "size at which a partition starts a new segment file (0: node default)")
	fs.StringVar(&f.segmentAge, "segment-age", "0", "age at which a partition starts a new segment file (0: node default)")
	fs.StringVar(&f.timestamps, "timestamps", "producer", "whose clock stamps records: producer or append (the node's)")
	fs.StringVar(&f.maxBatchBytes, "max-batch-bytes", "0", "largest record batch the topic accepts (0: node default)")
	return cmd
}

func printTopicConfig(w io.Writer, c sdk.TopicConfig) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  partitions\t%d\n", c.Partitions)
	dur := c.Durability.String()
	if c.Durability == sdk.DurabilityInterval {
		dur += " (" + c.SyncInterval.String() + ")"
	}
	fmt.Fprintf(tw, "  durability\t%s\n", dur)
	fmt.Fprintf(tw, "  compression\t%s\n", c.Compression)
	fmt.Fprintf(tw, "  timestamps\t%s\n", c.Timestamps)
	fmt.Fprintf(tw, "  retention\t%s\n", retentionString(c))
	fmt.Fprintf(tw, "  segments\t%s or %s\n", formatBytes(c.SegmentBytes), c.SegmentAge)
	fmt.Fprintf(tw, "  max batch\t%s\n", formatBytes(int64(c.MaxBatchBytes)))
	_ = tw.Flush()
}

func retentionString(c sdk.TopicConfig) string {
	var parts []string
	if c.RetentionAge > 0 {
		parts = append(parts, c.RetentionAge.String())
	}
	if c.RetentionBytes > 0 {
		parts = append(parts, formatBytes(c.RetentionBytes)+" per partition")
	}
	if len(parts) == 0 {
		return "forever"
	}
	return strings.Join(parts, ", ")
}

func newTopicListCommand(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the topics",
		Example: "  ledge topic list\n  ledge topic list --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				topics, err := c.ListTopics(ctx)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if asJSON {
					out := make([]topicJSON, len(topics))
					for i, t := range topics {
						out[i] = topicToJSON(t)
					}
					return writeJSON(w, out)
				}
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tDURABILITY\tCOMPRESSION\tRETENTION")
				for _, t := range topics {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", t.Name, t.Config.Partitions, t.Config.Durability,
						t.Config.Compression, retentionString(t.Config))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newTopicDescribeCommand(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "describe TOPIC",
		Short:   "Show a topic's configuration and each partition's offsets and history epoch",
		Example: "  ledge topic describe orders\n  ledge topic describe orders --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				d, err := c.DescribeTopic(ctx, args[0])
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if asJSON {
					out := struct {
						topicJSON
						Partitions []partitionJSON `json:"partitions_state"`
					}{topicToJSON(d.TopicInfo), partitionsToJSON(d.Partitions)}
					return writeJSON(w, out)
				}
				fmt.Fprintf(w, "topic %s (id %s)\n", d.Name, d.ID)
				printTopicConfig(w, d.Config)
				fmt.Fprintln(w)
				printPartitions(w, d.Partitions)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printPartitions prints partition states. RECORDS leaves out the
// offsets a recovery skipped after a crash; a SKIPPED column shows them
// when a partition has any.
func printPartitions(w io.Writer, ps []sdk.PartitionState) {
	skipped := slices.ContainsFunc(ps, func(p sdk.PartitionState) bool { return p.Skipped != 0 })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if skipped {
		fmt.Fprintln(tw, "PARTITION\tSTART\tHIGH WATERMARK\tRECORDS\tSKIPPED\tHISTORY\tSTATUS")
	} else {
		fmt.Fprintln(tw, "PARTITION\tSTART\tHIGH WATERMARK\tRECORDS\tHISTORY\tSTATUS")
	}
	for _, p := range ps {
		status := "ok"
		if p.Err != nil {
			status = p.Err.Error()
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t", p.Partition, p.StartOffset, p.HighWatermark, p.Records())
		if skipped {
			fmt.Fprintf(tw, "%d\t", p.Skipped)
		}
		fmt.Fprintf(tw, "%d\t%s\n", p.History, status)
	}
	_ = tw.Flush()
	if skipped {
		fmt.Fprintln(w, "\nSKIPPED: offsets a recovery after a crash numbered past; they hold no record.")
	}
}

func newTopicDeleteCommand(cf *clientFlags) *cobra.Command {
	var yes *bool
	cmd := &cobra.Command{
		Use:     "delete TOPIC",
		Short:   "Delete a topic with its data, offsets and sessions (asks first on a terminal; --yes does not, and is needed without one)",
		Example: "  ledge topic delete orders\n  ledge topic delete orders --yes",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				// A topic that does not exist is said before anyone is
				// asked about deleting it.
				if _, err := c.DescribeTopic(ctx, args[0]); err != nil {
					return err
				}
				if err := confirm(cmd, *yes, fmt.Sprintf("Delete topic %s with all its records, committed offsets and sessions?", args[0])); err != nil {
					return err
				}
				if err := c.DeleteTopic(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted topic %s\n", args[0])
				return nil
			})
		},
	}
	yes = addYesFlag(cmd)
	return cmd
}

func newTopicPurgeCommand(cf *clientFlags) *cobra.Command {
	var partitions []int
	var yes *bool
	cmd := &cobra.Command{
		Use:   "purge TOPIC",
		Short: "Empty a topic's partitions, fencing polls and commits made before",
		Long: `Purge partitions of a topic (all of them unless --partition is given): each
one's start offset rises to its high watermark and its history epoch rises
by one. Offsets are never reused. Consumers resume at the new start; polls
and commits made before the purge are refused.`,
		Example: "  ledge topic purge orders\n  ledge topic purge orders --partition 0 --partition 3 --yes",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			which := "every partition of " + args[0]
			if len(partitions) > 0 {
				which = fmt.Sprintf("%s of %s", plural(len(partitions), "partition"), args[0])
			}
			if err := confirm(cmd, *yes, fmt.Sprintf("Purge %s? Their records are gone for good.", which)); err != nil {
				return err
			}
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				ps := make([]int32, len(partitions))
				for i, p := range partitions {
					ps[i] = int32(p)
				}
				states, err := c.Purge(ctx, args[0], ps...)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "purged %s\n", args[0])
				printPartitions(cmd.OutOrStdout(), states)
				for _, s := range states {
					if s.Err != nil {
						return fmt.Errorf("partition %d: %w", s.Partition, s.Err)
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().IntSliceVar(&partitions, "partition", nil, "partition to purge (repeatable; default all)")
	yes = addYesFlag(cmd)
	return cmd
}

type topicJSON struct {
	Name           string `json:"name"`
	ID             string `json:"id"`
	Partitions     int    `json:"partitions"`
	Durability     string `json:"durability"`
	SyncInterval   string `json:"sync_interval,omitempty"`
	Compression    string `json:"compression"`
	Timestamps     string `json:"timestamps"`
	RetentionAge   string `json:"retention_age,omitempty"`
	RetentionBytes int64  `json:"retention_bytes,omitempty"`
	SegmentBytes   int64  `json:"segment_bytes"`
	SegmentAge     string `json:"segment_age"`
	MaxBatchBytes  int    `json:"max_batch_bytes"`
}

func topicToJSON(t sdk.TopicInfo) topicJSON {
	c := t.Config
	j := topicJSON{
		Name: t.Name, ID: t.ID.String(), Partitions: c.Partitions, Durability: c.Durability.String(),
		Compression: c.Compression.String(), Timestamps: c.Timestamps.String(), RetentionBytes: c.RetentionBytes,
		SegmentBytes: c.SegmentBytes, SegmentAge: c.SegmentAge.String(), MaxBatchBytes: c.MaxBatchBytes,
	}
	if c.Durability == sdk.DurabilityInterval {
		j.SyncInterval = c.SyncInterval.String()
	}
	if c.RetentionAge > 0 {
		j.RetentionAge = c.RetentionAge.String()
	}
	return j
}

type partitionJSON struct {
	Partition     int32  `json:"partition"`
	StartOffset   uint64 `json:"start_offset"`
	HighWatermark uint64 `json:"high_watermark"`
	History       uint64 `json:"history"`
	// Skipped are the offsets between start and high watermark that a
	// recovery skipped (describe only): records are high_watermark -
	// start_offset - skipped.
	Skipped uint64 `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
}

func partitionsToJSON(ps []sdk.PartitionState) []partitionJSON {
	out := make([]partitionJSON, len(ps))
	for i, p := range ps {
		out[i] = partitionJSON{Partition: p.Partition, StartOffset: p.StartOffset, HighWatermark: p.HighWatermark, History: p.History,
			Skipped: p.Skipped}
		if p.Err != nil {
			out[i].Error = p.Err.Error()
		}
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
