package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/sdk"
	"github.com/spf13/cobra"
)

func newDownlinkCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "downlink",
		Short: "Append a Kafka topic to a local topic, exactly once",
		Long: `A downlink reads every partition of a Kafka topic and appends its records
to a local topic exactly once: Kafka partition k to local partition k mod n,
keys, values, timestamps and headers kept, each record gaining the headers
ledge-kafka-partition and ledge-kafka-offset. The position is the offset
header of the newest record appended, so it is exactly as durable as the
records: a crash, a power loss or a WAN cut neither skips nor repeats a
record. Managing downlinks needs the admin scope.`,
		Example: `  ledge downlink add commands --kafka kafka-1:9092 --from cloud.commands
  ledge downlink add config --kafka k1:9093 --from cloud.config \
      --tls-ca /etc/ledge/kafka-ca.pem --sasl-mechanism SCRAM-SHA-512 \
      --sasl-user edge-17 --sasl-password-file /etc/ledge/kafka.pw
  ledge downlink list
  ledge downlink status commands
  ledge downlink remove commands`,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newDownlinkAddCommand(cf), newDownlinkListCommand(cf), newDownlinkStatusCommand(cf), newDownlinkRemoveCommand(cf))
	return cmd
}

func newDownlinkAddCommand(cf *clientFlags) *cobra.Command {
	var (
		cfg                                   sdk.DownlinkConfig
		seeds                                 []string
		tlsOn                                 bool
		tlsCA, tlsCert, tlsKey, tlsServerName string
		saslMech, saslUser, saslPasswordFile  string
	)
	cmd := &cobra.Command{
		Use:     "add LOCAL --kafka HOST:PORT --from KAFKA_TOPIC",
		Example: "  ledge downlink add commands --kafka kafka-1:9092,kafka-2:9092 --from cloud.commands",
		Short:   "Add (or replace) a topic's downlink from Kafka",
		Long: `Add a downlink: every partition of KAFKA_TOPIC, which must exist, is
appended to the local topic LOCAL from its oldest record, or, when LOCAL
already holds records of a downlink from KAFKA_TOPIC, right after the last
of them. Paths of TLS and SASL files are on the node.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Seeds = splitSeeds(seeds)
			if tlsOn || tlsCA != "" || tlsCert != "" || tlsKey != "" || tlsServerName != "" {
				cfg.TLS = &sdk.UplinkTLS{CAFile: tlsCA, CertFile: tlsCert, KeyFile: tlsKey, ServerName: tlsServerName}
			}
			if err := checkSASLFlags(saslMech, saslUser, saslPasswordFile); err != nil {
				return err
			}
			if saslMech != "" {
				cfg.SASL = &sdk.UplinkSASL{Mechanism: saslMech, User: saslUser, PasswordFile: saslPasswordFile}
			}
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				if err := c.AddDownlink(ctx, args[0], cfg); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "downlink %s <- %s on %s added\n", args[0], cfg.From, strings.Join(cfg.Seeds, ","))
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&seeds, "kafka", nil, "Kafka seed brokers, HOST:PORT (repeat or comma-separate)")
	f.StringVar(&cfg.From, "from", "", "Kafka topic to read")
	f.BoolVar(&tlsOn, "tls", false, "connect with TLS (system roots unless --tls-ca)")
	f.StringVar(&tlsCA, "tls-ca", "", "PEM CA file on the node")
	f.StringVar(&tlsCert, "tls-cert", "", "client certificate file on the node (mutual TLS)")
	f.StringVar(&tlsKey, "tls-key", "", "client key file on the node")
	f.StringVar(&tlsServerName, "tls-server-name", "", "server name to verify")
	f.StringVar(&saslMech, "sasl-mechanism", "", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	f.StringVar(&saslUser, "sasl-user", "", "SASL user")
	f.StringVar(&saslPasswordFile, "sasl-password-file", "", "file on the node holding the SASL password")
	_ = cmd.MarkFlagRequired("kafka")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

func newDownlinkListCommand(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Example: "  ledge downlink list\n  ledge downlink list --json",
		Short:   "List downlinks with their total lag",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				dls, err := c.ListDownlinks(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(dls)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "TOPIC\tKAFKA TOPIC\tSTATE\tCONNECTED\tLAG\tRECORDS\tDELETED\tFAILURES")
				for _, d := range dls {
					var lag int64
					var deleted uint64
					for _, p := range d.Partitions {
						lag, deleted = lag+p.Lag, deleted+p.Deleted
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", d.Topic, d.Config.From, d.State,
						yesNo(d.Connected), lag, d.Records, deleted, d.Failures)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func newDownlinkStatusCommand(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "status LOCAL",
		Example: "  ledge downlink status commands",
		Short:   "Show a downlink: lag per Kafka partition, records, errors, connection",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				d, err := c.DownlinkStatus(ctx, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(d)
				}
				return printDownlinkStatus(cmd.OutOrStdout(), d)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printDownlinkStatus prints a downlink's Kafka partitions, then what
// needs an operator's eye: failures and records Kafka deleted unread.
func printDownlinkStatus(out io.Writer, d sdk.Downlink) error {
	fmt.Fprintf(out, "downlink %s <- %s (%s): %s, connected %s, %s appended\n",
		d.Topic, d.Config.From, strings.Join(d.Config.Seeds, ","), d.State, yesNo(d.Connected), plural(int(d.Records), "record"))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KAFKA PARTITION\tLOCAL\tPOSITION\tKAFKA HIGH WATERMARK\tLAG\tRECORDS\tDELETED\tPRODUCER")
	for _, p := range d.Partitions {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d\t%d\t%d\t%d/%d\n", p.Partition, p.Local, offsetOrDash(p.Position),
			offsetOrDash(p.HighWatermark), p.Lag, p.Records, p.Deleted, p.Producer, p.Epoch)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if d.Failures > 0 || d.LastError != "" {
		line := plural(int(d.Failures), "failure")
		if d.Failing > 0 {
			line += fmt.Sprintf(", failing for %s", d.Failing.Round(time.Second))
		}
		if d.Backoff > 0 {
			line += fmt.Sprintf(", next attempt in %s", d.Backoff.Round(time.Millisecond))
		}
		if d.LastError != "" {
			line += "; last: " + d.LastError
		}
		fmt.Fprintln(out, line)
	}
	for _, p := range d.Partitions {
		if p.Deleted > 0 {
			fmt.Fprintf(out, "Kafka partition %d: %s deleted by Kafka (retention) before they were read; skipped\n",
				p.Partition, plural(int(p.Deleted), "record"))
		}
	}
	return nil
}

func offsetOrDash(v int64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

func newDownlinkRemoveCommand(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "remove LOCAL",
		Example: "  ledge downlink remove commands",
		Short:   "Stop and forget a topic's downlink (what it appended stays)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				if err := c.RemoveDownlink(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed the downlink of %s\n", args[0])
				return nil
			})
		},
	}
}

// printStatusDownlinks is the downlinks' part of `ledge status`: one line
// per Kafka partition read, nothing when the node has no downlink.
func printStatusDownlinks(w io.Writer, dls []ops.DownlinkStatus) error {
	if len(dls) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DOWNLINK\tFROM\tSTATE\tCONNECTED\tLAG\tRECORDS\tDELETED\tFAILING FOR")
	for _, d := range dls {
		failing := "-"
		if d.FailingSeconds > 0 {
			failing = humanDuration(d.FailingSeconds)
		}
		for _, p := range d.Partitions {
			fmt.Fprintf(tw, "%s/%d\t%s/%d\t%s\t%s\t%d\t%d\t%d\t%s\n", d.Topic, p.Local, d.From, p.Partition,
				d.State, yesNo(d.Connected), p.Lag, p.Records, p.Deleted, failing)
		}
	}
	return tw.Flush()
}
