package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/ledgemq/ledge/sdk"
	"github.com/spf13/cobra"
)

func newStateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Inspect the fenced state of consumer groups",
		Long: `A consumer group may keep a keyed state per partition beside its committed
offset (counters, aggregates, snapshots), written only together with the
offset by the member that holds the partition. These commands read it,
read-only, with a token that has the admin scope.`,
		Example: "  ledge state get counter events 0\n  ledge state get counter events 0 user-42",
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newStateGetCommand(cf))
	return cmd
}

type stateJSON struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the offset the state belongs to (null: never
	// committed), History the history epoch it was committed in.
	Committed      *uint64          `json:"committed"`
	History        uint64           `json:"history,omitempty"`
	CurrentHistory uint64           `json:"current_history"`
	Moved          bool             `json:"moved"`
	Resume         uint64           `json:"resume"`
	Entries        []stateEntryJSON `json:"entries"`
}

type stateEntryJSON struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func newStateGetCommand(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get GROUP TOPIC PARTITION [KEY]",
		Short: "Show a group's state on a partition, with the offset it belongs to",
		Long: `Show the state group GROUP keeps for partition PARTITION of TOPIC — every
key, or only KEY — together with the committed offset the state belongs
to and the history epoch it was committed in. The state is the effect of
the records before that offset; after a purge (a newer current history
epoch, "moved") it was derived from records that are gone.

Keys and values that are not printable text are shown quoted.`,
		Example: `  ledge state get counter events 0
  ledge state get counter events 0 user-42
  ledge state get counter events 3 --json`,
		Args: cobra.RangeArgs(3, 4),
		RunE: func(cmd *cobra.Command, args []string) error {
			part, err := strconv.ParseInt(args[2], 10, 32)
			if err != nil || part < 0 {
				return fmt.Errorf("partition %q: not a partition index", args[2])
			}
			var key []byte
			if len(args) == 4 {
				if args[3] == "" {
					return fmt.Errorf("the key is empty")
				}
				key = []byte(args[3])
			}
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				s, err := c.InspectState(ctx, args[0], args[1], int32(part), key)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), stateToJSON(args[0], s))
				}
				return printState(cmd.OutOrStdout(), args[0], s)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func stateToJSON(group string, s *sdk.PartitionStateSnapshot) stateJSON {
	out := stateJSON{
		Group: group, Topic: s.Topic, Partition: s.Partition, History: s.History,
		CurrentHistory: s.CurrentHistory, Moved: s.Moved, Resume: s.Next, Entries: []stateEntryJSON{},
	}
	if s.HasCommitted {
		off := s.Offset
		out.Committed = &off
	}
	for _, e := range s.Entries {
		out.Entries = append(out.Entries, stateEntryJSON{Key: showBytes(e.Key), Value: showBytes(e.Value)})
	}
	return out
}

func printState(w io.Writer, group string, s *sdk.PartitionStateSnapshot) error {
	if !s.HasCommitted {
		fmt.Fprintf(w, "group %s has no state on %s/%d (nothing committed)\n", group, s.Topic, s.Partition)
		return nil
	}
	fmt.Fprintf(w, "group %s on %s/%d: state at offset %d (history %d", group, s.Topic, s.Partition, s.Offset, s.History)
	if s.Moved {
		fmt.Fprintf(w, ", partition now at history %d: derived from purged records; resumes at %d", s.CurrentHistory, s.Next)
	}
	fmt.Fprintf(w, "), %s\n", plural(len(s.Entries), "key"))
	if len(s.Entries) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE")
	for _, e := range s.Entries {
		fmt.Fprintf(tw, "%s\t%s\n", showBytes(e.Key), showBytes(e.Value))
	}
	return tw.Flush()
}

// showBytes prints b as is when it is printable UTF-8, quoted otherwise.
func showBytes(b []byte) string {
	if utf8.Valid(b) {
		s := string(b)
		if strconv.Quote(s) == `"`+s+`"` {
			return s
		}
	}
	return strconv.Quote(string(b))
}
