package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ledgemq/ledge/sdk"
	"github.com/spf13/cobra"
)

func newTokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke access tokens",
		Long: `Manage the node's bearer tokens. A token grants scopes (produce, consume,
admin) on one topic or on all topics ("*"). The node stores tokens hashed:
a token's secret is printed once, when it is created. Revoking a token
closes the connections that use it. All of this needs the admin scope.`,
		Example: `  ledge token create --topic orders --allow produce,consume --label pos-terminals
  ledge token list
  ledge token revoke 3f9c2a1b`,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newTokenCreateCommand(cf), newTokenListCommand(cf), newTokenRevokeCommand(cf))
	return cmd
}

// parseScopes parses "produce,consume,admin".
func parseScopes(s string) (sdk.Scope, error) {
	var sc sdk.Scope
	for _, part := range strings.Split(s, ",") {
		switch strings.TrimSpace(part) {
		case "produce":
			sc |= sdk.ScopeProduce
		case "consume":
			sc |= sdk.ScopeConsume
		case "admin":
			sc |= sdk.ScopeAdmin
		case "all":
			sc |= sdk.ScopeProduce | sdk.ScopeConsume | sdk.ScopeAdmin
		case "":
		default:
			return 0, fmt.Errorf("--allow: unknown scope %q (want produce, consume, admin or all)", part)
		}
	}
	if sc == 0 {
		return 0, fmt.Errorf("--allow: name at least one scope")
	}
	return sc, nil
}

func newTokenCreateCommand(cf *clientFlags) *cobra.Command {
	var (
		topic, allow, label string
		expires             time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a token and print its secret (shown only this once)",
		Example: `  ledge token create --topic orders --allow produce
  ledge token create --topic '*' --allow consume --label dashboards --expires 720h
  export LEDGE_TOKEN=$(ledge token create --topic orders --allow produce,consume --quiet)`,
		Args: cobra.NoArgs,
	}
	var quiet bool
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		scopes, err := parseScopes(allow)
		if err != nil {
			return err
		}
		if topic == "" {
			return fmt.Errorf("--topic is required (a topic name, or '*' for all topics)")
		}
		spec := sdk.TokenSpec{Label: label, Topic: topic, Scopes: scopes}
		if expires > 0 {
			spec.ExpiresAt = time.Now().Add(expires)
		}
		ctx := cmd.Context()
		c, err := cf.dial(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		info, secret, err := c.CreateToken(ctx, spec)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		if quiet {
			fmt.Fprintln(w, secret)
			return nil
		}
		fmt.Fprintf(w, "token %s: %s on %s", info.ID, info.Scopes, info.Topic)
		if !info.ExpiresAt.IsZero() {
			fmt.Fprintf(w, ", expires %s", info.ExpiresAt.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(w, "\nsecret (shown only now): %s\n", secret)
		return nil
	}
	fs := cmd.Flags()
	fs.StringVar(&topic, "topic", "", "topic the token applies to, or '*' for all topics")
	fs.StringVar(&allow, "allow", "produce,consume", "scopes: produce, consume, admin (comma-separated) or all")
	fs.StringVar(&label, "label", "", "a name for people")
	fs.DurationVar(&expires, "expires", 0, "validity from now (0: never expires)")
	fs.BoolVarP(&quiet, "quiet", "q", false, "print only the secret")
	return cmd
}

func newTokenListCommand(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List tokens (without their secrets)",
		Example: "  ledge token list",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				toks, err := c.ListTokens(ctx)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tLABEL\tTOPIC\tSCOPES\tCREATED\tEXPIRES")
				for _, t := range toks {
					exp := "never"
					if !t.ExpiresAt.IsZero() {
						exp = t.ExpiresAt.UTC().Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Label, t.Topic, t.Scopes,
						t.CreatedAt.UTC().Format(time.RFC3339), exp)
				}
				return tw.Flush()
			})
		},
	}
}

func newTokenRevokeCommand(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "revoke ID",
		Short:   "Revoke a token and close its connections",
		Example: "  ledge token revoke 3f9c2a1b",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return cf.with(ctx, func(c *sdk.Client) error {
				if err := c.RevokeToken(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "revoked token %s\n", args[0])
				return nil
			})
		},
	}
}
