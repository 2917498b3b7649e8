package config

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Parsers and printers of the value kinds. A parser returns an error
// that completes "want ...", so that every message says what is allowed.

// byteUnits are the accepted size suffixes, longest first so that "MiB" is
// tried before "B".
func byteUnits() []struct {
	suffix string
	mult   int64
} {
	return []struct {
		suffix string
		mult   int64
	}{
		{"tib", 1 << 40}, {"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
		{"tb", 1e12}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3},
		{"b", 1},
	}
}

// parseBytes parses a size: an integer number of bytes, optionally with a
// unit (KiB, MiB, GiB, TiB are powers of 1024; kB, MB, GB, TB of 1000).
func parseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range byteUnits() {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("a size in bytes such as 1048576, 64KiB, 8MiB or 1GiB")
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("a size below 8 EiB")
	}
	return n * mult, nil
}

// formatBytes prints a size with the largest power-of-1024 unit that
// divides it.
func formatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// parseDuration parses a Go duration (500ms, 30s, 5m, 1h30m); a bare 0
// is accepted too.
func parseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("a duration such as 500ms, 30s, 5m or 1h")
	}
	return d, nil
}

// formatDuration prints d without the zero tails of time.Duration.String
// (5m rather than 5m0s).
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// parseBool accepts true/false, yes/no, on/off and 1/0.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "yes", "on", "1":
		return true, nil
	case "false", "no", "off", "0":
		return false, nil
	}
	return false, fmt.Errorf("true or false")
}

// checkHostPort accepts host:port with a numeric port (0 picks a free
// one). The host may be empty (all interfaces), a name or an address.
func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("host:port, such as 127.0.0.1:7420 or [::]:7420")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("host:port with a port from 0 to 65535")
	}
	if strings.ContainsFunc(host, unicode.IsSpace) {
		return fmt.Errorf("host:port without spaces")
	}
	return nil
}

// checkIP accepts an IPv4 or IPv6 address.
func checkIP(s string) error {
	if net.ParseIP(s) == nil {
		return fmt.Errorf("IP addresses such as 192.168.1.10 or fd00::1")
	}
	return nil
}

// checkDNSName accepts a host name: dot-separated labels of letters,
// digits and '-', optionally starting with a "*." wildcard; not an
// address (those go to cert.addrs).
func checkDNSName(s string) error {
	want := fmt.Errorf("DNS names such as ledge.example.net (addresses go to cert.addrs)")
	if s == "" || len(s) > 253 || net.ParseIP(s) != nil {
		return want
	}
	for _, label := range strings.Split(strings.TrimPrefix(s, "*."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return want
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return want
			}
		}
	}
	return nil
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
