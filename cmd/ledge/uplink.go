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

func newUplinkCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "uplink",
		Short: "Forward topics to Kafka, exactly once",
		Long: `An uplink forwards every partition of a topic to a Kafka topic through a
transactional producer, exactly once: records and the forwarding position
commit together in one Kafka transaction. Offline for hours is normal: the
uplink backs off and resumes, and its lag shows in 'ledge uplink status',
the metrics and the status page. Managing uplinks needs the admin scope.`,
		Example: `  ledge uplink add orders --kafka kafka-1:9092 --to edge.orders
  ledge uplink add telemetry --kafka k1:9093,k2:9093 --to tele --partitioning key \
      --tls-ca /etc/ledge/kafka-ca.pem --sasl-mechanism SCRAM-SHA-512 \
      --sasl-user edge-17 --sasl-password-file /etc/ledge/kafka.pw
  ledge uplink list
  ledge uplink status orders
  ledge uplink remove orders`,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newUplinkAddCommand(cf), newUplinkListCommand(cf), newUplinkStatusCommand(cf), newUplinkRemoveCommand(cf))
	return cmd
}

func newUplinkAddCommand(cf *clientFlags) *cobra.Command {
	var (
		cfg                                   sdk.UplinkConfig
		seeds                                 []string
		tlsOn                                 bool
		tlsCA, tlsCert, tlsKey, tlsServerName string
		saslMech, saslUser, saslPasswordFile  string
	)
	cmd := &cobra.Command{
		Use:     "add TOPIC --kafka HOST:PORT --to KAFKA_TOPIC",
		Example: "  ledge uplink add orders --kafka kafka-1:9092,kafka-2:9092 --to edge.orders --partitioning key",
		Short:   "Add (or replace) a topic's uplink to Kafka",
		Long: `Add an uplink: every partition of TOPIC is forwarded to KAFKA_TOPIC, which
must exist (with at least as many partitions for --partitioning same).
--overflow block (the default) keeps retention from deleting records that
were not forwarded yet; drop-oldest lets retention run and counts what it
dropped. Paths of TLS and SASL files are on the node.`,
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
				if err := c.AddUplink(ctx, args[0], cfg); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "uplink %s -> %s on %s added\n", args[0], cfg.To, strings.Join(cfg.Seeds, ","))
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&seeds, "kafka", nil, "Kafka seed brokers, HOST:PORT (repeat or comma-separate)")
	f.StringVar(&cfg.To, "to", "", "target Kafka topic")
	f.StringVar(&cfg.Partitioning, "partitioning", "same", "same (Ledge partition i to Kafka partition i) or key (Kafka's key hash)")
	f.StringVar(&cfg.Overflow, "overflow", "block", "block (retention keeps unforwarded records) or drop-oldest")
	f.StringVar(&cfg.Overflow, "uplink-overflow", "block", "the same as --overflow")
	_ = f.MarkHidden("uplink-overflow")
	f.BoolVar(&tlsOn, "tls", false, "connect with TLS (system roots unless --tls-ca)")
	f.StringVar(&tlsCA, "tls-ca", "", "PEM CA file on the node")
	f.StringVar(&tlsCert, "tls-cert", "", "client certificate file on the node (mutual TLS)")
	f.StringVar(&tlsKey, "tls-key", "", "client key file on the node")
	f.StringVar(&tlsServerName, "tls-server-name", "", "server name to verify")
	f.StringVar(&saslMech, "sasl-mechanism", "", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	f.StringVar(&saslUser, "sasl-user", "", "SASL user")
	f.StringVar(&saslPasswordFile, "sasl-password-file", "", "file on the node holding the SASL password")
	_ = cmd.MarkFlagRequired("kafka")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

func splitSeeds(in []string) []string {
	var out []string
	for _, s := range in {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func newUplinkListCommand(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Example: "  ledge uplink list\n  ledge uplink list --json",
		Short:   "List uplinks with their total lag",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				ups, err := c.ListUplinks(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(ups)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "TOPIC\tKAFKA TOPIC\tPARTITIONING\tOVERFLOW\tLAG\tOLDEST\tDROPPED\tHELD BACK\tSTATE")
				for _, u := range ups {
					var lag, dropped, held uint64
					var age time.Duration
					for _, p := range u.Partitions {
						lag, dropped, held, age = lag+p.LagRecords, dropped+p.Dropped, held+p.HeldBack, max(age, p.LagAge)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\n", u.Topic, u.Config.To, u.Config.Partitioning,
						u.Config.Overflow, lag, age.Round(time.Second), dropped, held, uplinkStateSummary(u))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// uplinkStateSummary is the worst partition state: fenced, backoff,
// connecting, stopped, then forwarding.
func uplinkStateSummary(u sdk.Uplink) string {
	rank := map[string]int{"fenced": 5, "backoff": 4, "connecting": 3, "stopped": 2, "forwarding": 1}
	worst := ""
	for _, p := range u.Partitions {
		if rank[p.State] > rank[worst] {
			worst = p.State
		}
	}
	return worst
}

func newUplinkStatusCommand(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "status TOPIC",
		Example: "  ledge uplink status orders",
		Short:   "Show an uplink's forwarders: position, lag, dropped, state",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				u, err := c.UplinkStatus(ctx, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(u)
				}
				return printUplinkStatus(cmd.OutOrStdout(), u)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printUplinkStatus prints an uplink's partitions, then what needs an
// operator's eye: failing forwarders, records retention held back (block)
// and records dropped before they were forwarded (drop-oldest, purge).
func printUplinkStatus(out io.Writer, u sdk.Uplink) error {
	fmt.Fprintf(out, "uplink %s -> %s (%s) partitioning %s, overflow %s\n",
		u.Topic, u.Config.To, strings.Join(u.Config.Seeds, ","), u.Config.Partitioning, u.Config.Overflow)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tSTATE\tPOSITION\tHIGH WATERMARK\tLAG\tOLDEST\tFORWARDED\tDROPPED\tHELD BACK\tFAILURES")
	for _, p := range u.Partitions {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%d\n", p.Partition, p.State, p.Position,
			p.HighWatermark, p.LagRecords, p.LagAge.Round(time.Second), p.Forwarded, p.Dropped, p.HeldBack, p.Failures)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range u.Partitions {
		if p.Failing > 0 || p.State == "backoff" || p.State == "fenced" {
			line := fmt.Sprintf("partition %d: %s", p.Partition, p.State)
			if p.Failing > 0 {
				line += fmt.Sprintf(", failing for %s", p.Failing.Round(time.Second))
			}
			if p.Backoff > 0 {
				line += fmt.Sprintf(", next attempt in %s", p.Backoff.Round(time.Millisecond))
			}
			if p.LastError != "" {
				line += ": " + p.LastError
			}
			fmt.Fprintln(out, line)
		}
		if p.HeldBack > 0 {
			fmt.Fprintf(out, "partition %d: retention held back %s not yet forwarded (overflow block): "+
				"the partition is over its retention limits until Kafka takes them\n", p.Partition, plural(int(p.HeldBack), "record"))
		}
		if p.Dropped > 0 {
			fmt.Fprintf(out, "partition %d: %s deleted before forwarded "+
				"(retention under overflow drop-oldest, or a purge); see the node's log\n", p.Partition, plural(int(p.Dropped), "record"))
		}
	}
	return nil
}

// printStatusUplinks is the uplinks' part of `ledge status`: one line per
// forwarded partition, nothing when the node has no uplink.
func printStatusUplinks(w io.Writer, ups []ops.UplinkTopicStatus) error {
	if len(ups) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "UPLINK\tTO\tOVERFLOW\tSTATE\tLAG\tOLDEST\tFORWARDED\tDROPPED\tHELD BACK\tFAILING FOR")
	for _, u := range ups {
		for _, p := range u.Partitions {
			failing := "-"
			if p.FailingSeconds > 0 {
				failing = humanDuration(p.FailingSeconds)
			}
			oldest := "-"
			if p.LagAgeSeconds > 0 {
				oldest = humanDuration(p.LagAgeSeconds)
			}
			fmt.Fprintf(tw, "%s/%d\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\n", u.Topic, p.Partition, u.To, u.Overflow,
				p.State, p.LagRecords, oldest, p.Forwarded, p.Dropped, p.HeldBack, failing)
		}
	}
	return tw.Flush()
}

func newUplinkRemoveCommand(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "remove TOPIC",
		Example: "  ledge uplink remove orders",
		Short:   "Stop and forget a topic's uplink (its position stays in Kafka)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				if err := c.RemoveUplink(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed the uplink of %s\n", args[0])
				return nil
			})
		},
	}
}
