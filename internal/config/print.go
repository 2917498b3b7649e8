package config

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ledgemq/ledge/internal/logging"
	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/node/session"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/quic/certs"
)

// Print writes the effective configuration as a YAML file that --config
// reads back, each value followed by a comment saying where it came from.
func (c *Config) Print(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Effective configuration of ledge serve.\n")
	b.WriteString("# Precedence: flags > LEDGE_* environment variables > file > defaults.\n")
	if c.File != "" {
		fmt.Fprintf(&b, "# File: %s\n", c.File)
	}
	writeYAML(&b, func(k Key) string {
		return yamlValue(k, k.get(c)) + "  # " + c.origins[k.Name]
	})
	_, err := io.WriteString(w, b.String())
	return err
}

// DefaultYAML returns a --config file with every key at its default,
// which docs/OPERATIONS.md carries.
func DefaultYAML() string {
	var b strings.Builder
	writeYAML(&b, func(k Key) string { return yamlValue(k, k.Default) })
	return b.String()
}

// writeYAML writes every key with the value that value gives it, keys of
// a section ("quic.max_conns") under their section's name.
func writeYAML(b *strings.Builder, value func(Key) string) {
	var section string
	for _, k := range Keys() {
		name, indent := k.Name, ""
		if i := strings.IndexByte(k.Name, '.'); i >= 0 {
			if k.Name[:i] != section {
				section = k.Name[:i]
				fmt.Fprintf(b, "%s:\n", section)
			}
			name, indent = k.Name[i+1:], "  "
		} else {
			section = ""
		}
		fmt.Fprintf(b, "%s%s: %s\n", indent, name, value(k))
	}
}

// yamlValue spells a value for the file: lists as flow sequences, strings
// quoted where YAML needs it.
func yamlValue(k Key, v string) string {
	switch k.Kind {
	case KindList:
		items := splitList(v)
		for i, it := range items {
			items[i] = yamlString(it)
		}
		return "[" + strings.Join(items, ", ") + "]"
	case KindString, KindAddress:
		return yamlString(v)
	}
	return v
}

func yamlString(s string) string {
	out, err := yaml.Marshal(s)
	if err != nil {
		return fmt.Sprintf("%q", s)
	}
	return strings.TrimSuffix(string(out), "\n")
}

// MarkdownTable returns the table of every key that docs/OPERATIONS.md
// carries.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| Key (file) | Flag | Environment | Default | Unit | Allowed | What it does |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, k := range Keys() {
		def := k.Default
		switch {
		case k.Kind == KindList && def == "":
			def = "[]"
		case def == "":
			def = `""`
		}
		unit := k.Unit
		if unit == "" {
			unit = "–"
		}
		fmt.Fprintf(&b, "| `%s` | `--%s` | `%s` | `%s` | %s | %s | %s |\n",
			k.Name, k.Flag(), k.Env(), def, unit, k.Allowed, k.Help)
	}
	return b.String()
}

// Node returns the node configuration the settings describe. The caller
// sets what is not a setting: Logger, Version, and the metrics hooks.
func (c *Config) Node() node.Config {
	sourceRate := float64(c.QUIC.SourceHandshakeRate)
	if sourceRate == 0 {
		sourceRate = -1 // the transport's "off"
	}
	handshakeWait := c.QUIC.HandshakeWaitTarget
	if handshakeWait == 0 {
		handshakeWait = -1 // the transport's "off"
	}
	retention := c.RetentionInterval
	if retention == 0 {
		retention = -1 // the node's "off"
	}
	return node.Config{
		DataDir:           c.DataDir,
		Listen:            c.Listen,
		CertNames:         c.AllCertNames(),
		RetentionInterval: retention,
		MaxParkedPolls:    c.Polls.MaxParked,
		MaxPollWait:       c.Polls.MaxWait,
		MaxPollBytes:      int(c.Polls.MaxBytes),
		MaxStreamRequests: c.QUIC.MaxRequestsPerStream,
		Shed: session.ShedConfig{MaxRequests: offIfZero(c.Overload.MaxRequests),
			MaxBytes: offIfZero(c.Overload.MaxBytes), DelayTarget: offIfZero(c.Overload.DelayTarget)},
		Plugins: plugins.Config{MemoryBudget: c.Plugins.MemoryBudget, MaxConcurrentCalls: c.Plugins.Workers,
			CallTimeout: c.Plugins.CallTimeout},
		KafkaListen:             c.Kafka.Listen,
		KafkaTLS:                c.Kafka.TLS,
		KafkaMaxRequestElements: c.Kafka.MaxRequestElements,
		Transport: quic.Config{
			MaxConns:             c.QUIC.MaxConns,
			MaxUnauthenticated:   c.QUIC.MaxUnauthenticated,
			MaxConnsPerToken:     c.QUIC.MaxConnsPerToken,
			SourceHandshakeRate:  sourceRate,
			SourceHandshakeBurst: c.QUIC.SourceHandshakeBurst,
			MaxIncomingStreams:   int64(c.QUIC.MaxStreams),
			MaxFrameSize:         int(c.QUIC.MaxFrameSize),
			InflightBudget:       c.QUIC.InflightBudget,
			ReceiveWindowBudget:  uint64(c.QUIC.ReceiveWindowBudget),
			MaxIdleTimeout:       c.QUIC.IdleTimeout,
			KeepAlivePeriod:      c.QUIC.KeepAlive,
			HandshakeTimeout:     c.QUIC.HandshakeTimeout,
			HandshakeWaitTarget:  handshakeWait,
			AuthTimeout:          c.QUIC.AuthTimeout,
		},
	}
}

// AllCertNames returns every name the server certificate is valid for:
// the defaults (localhost, 127.0.0.1, ::1, the host name), the addresses
// and the names, sorted, without repeats.
func (c *Config) AllCertNames() []string {
	out := append(certs.DefaultNames(), c.CertAddrs...)
	out = append(out, c.CertNames...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Logger returns the node's logger writing to w (stderr) per log.format
// and log.level.
func (c *Config) Logger(w io.Writer) *slog.Logger {
	f, err := logging.ParseFormat(c.Log.Format)
	if err != nil {
		f = logging.FormatAuto
	}
	lvl, err := logging.ParseLevel(c.Log.Level)
	if err != nil {
		lvl = slog.LevelInfo
	}
	return logging.New(w, f, lvl)
}

// offIfZero is a setting's 0 ("off") as the node's negative.
func offIfZero[T int | int64 | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}
