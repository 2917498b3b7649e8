package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/ledgemq/ledge/sdk"
	"github.com/spf13/cobra"
)

// Environment variables the client commands read when a flag is not
// given. The SDK reads the two that locate a node (LEDGE_SERVER,
// LEDGE_DATA_DIR) itself; the credentials' are the CLI's.
const (
	envServer    = sdk.EnvServer
	envCA        = sdk.EnvCA
	envToken     = sdk.EnvToken
	envTokenFile = sdk.EnvTokenFile
	envDataDir   = sdk.EnvDataDir
)

// clientFlags are how a client command reaches a node.
type clientFlags struct {
	server         string
	ca             string
	token          string
	tokenFile      string
	dataDir        string
	timeout        time.Duration
	connectTimeout time.Duration
}

// clientFlagsHelp is appended to the help of every client command.
const clientFlagsHelp = `
Connection: run in the directory that holds a node's ledge-data, no flags
are needed: the node's address (from the listen file it keeps there while
it runs), the CA certificate and the admin token are read from there
(--data-dir or LEDGE_DATA_DIR names another data directory). Elsewhere:
--server (or LEDGE_SERVER), --ca (or LEDGE_CA) and --token (or
LEDGE_TOKEN), or --token-file (or LEDGE_TOKEN_FILE) to keep the secret out
of the command line. A flag wins over its variable, and both over the data
directory; with none of them the address is ` + sdk.DefaultAddr + `.`

// addClientFlags registers the connection flags on cmd and its
// subcommands.
func addClientFlags(cmd *cobra.Command) *clientFlags {
	f := &clientFlags{}
	fs := cmd.PersistentFlags()
	fs.StringVar(&f.server, "server", "", "node address host:port (env "+envServer+"; default: where the node on the data directory listens, else "+sdk.DefaultAddr+")")
	fs.StringVar(&f.ca, "ca", "", "CA certificate file the node's certificate is checked against (env "+envCA+")")
	fs.StringVar(&f.token, "token", "", "bearer token (env "+envToken+"; default: the admin token of the data directory)")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token, so that it is not in the command line (env "+envTokenFile+")")
	fs.StringVar(&f.dataDir, "data-dir", "", "a node's data directory to take the CA and admin token from (env "+envDataDir+"; default ./"+sdk.DefaultDataDir+" when present)")
	fs.DurationVar(&f.timeout, "timeout", sdk.DefaultRequestTimeout, "how long to wait for each reply")
	fs.DurationVar(&f.connectTimeout, "connect-timeout", 2*time.Second, "how long to wait for the node to answer the connection")
	cmd.Long += "\n" + clientFlagsHelp
	return f
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// dial connects to the node the flags and environment describe: a flag
// wins over its variable, a token over a token file, and both over the
// data directory's admin token.
func (f *clientFlags) dial(ctx context.Context) (*sdk.Client, error) {
	opts := []sdk.Option{sdk.WithRequestTimeout(f.timeout), sdk.WithDialTimeout(f.connectTimeout)}
	// A data directory named must exist, by flag or variable alike.
	if dir := firstNonEmpty(f.dataDir, os.Getenv(envDataDir)); dir != "" {
		opts = append(opts, sdk.WithDataDir(dir))
	}
	if ca := firstNonEmpty(f.ca, os.Getenv(envCA)); ca != "" {
		opts = append(opts, sdk.WithCAFile(ca))
	}
	switch {
	case f.token != "":
		opts = append(opts, sdk.WithToken(f.token))
	case f.tokenFile != "":
		opts = append(opts, sdk.WithTokenFile(f.tokenFile))
	case os.Getenv(envToken) != "":
		opts = append(opts, sdk.WithToken(os.Getenv(envToken)))
	case os.Getenv(envTokenFile) != "":
		opts = append(opts, sdk.WithTokenFile(os.Getenv(envTokenFile)))
	}
	c, err := sdk.Dial(ctx, f.server, opts...)
	if err != nil {
		addr, _, _ := sdk.DialAddr(f.server, opts...)
		return nil, &dialError{addr: addr, err: err}
	}
	return c, nil
}

// with dials the node, runs fn with the client and closes it.
func (f *clientFlags) with(ctx context.Context, fn func(c *sdk.Client) error) error {
	c, err := f.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

// parseSize parses a byte count: a plain number, or one with a unit
// (k, KB, KiB, M, MB, MiB, G, GB, GiB, T...; decimal units are powers of
// 1000, binary ones of 1024, a bare letter is binary).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsDigit(r) && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("invalid size %q (want a byte count like 1048576, 512KiB or 10GB)", s)
	}
	mult := float64(1)
	switch strings.ToLower(unit) {
	case "", "b":
	case "k", "kib":
		mult = 1 << 10
	case "kb":
		mult = 1e3
	case "m", "mib":
		mult = 1 << 20
	case "mb":
		mult = 1e6
	case "g", "gib":
		mult = 1 << 30
	case "gb":
		mult = 1e9
	case "t", "tib":
		mult = 1 << 40
	case "tb":
		mult = 1e12
	default:
		return 0, fmt.Errorf("invalid size %q: unknown unit %q", s, unit)
	}
	return int64(v * mult), nil
}

// parseAge parses a duration, also in days ("7d", "1d12h").
func parseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, nil
	}
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.Atoi(s[:i])
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		days = time.Duration(n) * 24 * time.Hour
		s = s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (want something like 90m, 36h or 7d)", s)
	}
	return days + d, nil
}

// formatBytes prints a byte count in binary units.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
