package logging

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// Format is how log records are written.
type Format string

// Formats.
const (
	// FormatAuto writes text when the output is a terminal and JSON
	// otherwise (a file, a pipe, journald).
	FormatAuto Format = "auto"
	// FormatText writes logfmt-style key=value lines.
	FormatText Format = "text"
	// FormatJSON writes one JSON object per line.
	FormatJSON Format = "json"
)

// Formats returns the accepted format names, in the order help texts
// show them.
func Formats() []string { return []string{string(FormatAuto), string(FormatText), string(FormatJSON)} }

// Levels returns the accepted level names, from the most to the least
// verbose.
func Levels() []string { return []string{"debug", "info", "warn", "error"} }

// ErrInvalid is matched (errors.Is) by every error of ParseFormat and
// ParseLevel. Not retryable: the setting must be fixed.
var ErrInvalid = errors.New("logging: invalid setting")

// ParseFormat parses a format name (case-insensitive).
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case FormatAuto, FormatText, FormatJSON:
		return f, nil
	}
	return "", fmt.Errorf("%w: format %q: want one of %s", ErrInvalid, s, strings.Join(Formats(), ", "))
}

// ParseLevel parses a level name (case-insensitive): debug, info, warn
// (or warning) or error.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%w: level %q: want one of %s", ErrInvalid, s, strings.Join(Levels(), ", "))
}

// New returns a logger writing to w in format at level and above.
// FormatAuto picks text when w is a terminal (an *os.File on a character
// device) and JSON otherwise.
func New(w io.Writer, format Format, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: readable}
	if format == FormatAuto {
		format = FormatJSON
		if IsTerminal(w) {
			format = FormatText
		}
	}
	if format == FormatJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// IsTerminal reports whether w is a terminal: an *os.File whose mode says
// character device. A redirected stderr (file, pipe, socket) is not.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// readable writes values the way a person reads them, the same in both
// formats: a duration as Go writes it ("1.5s"; JSON would write
// nanoseconds), and a value with a String method (a plugin's kind, a
// digest in hex, an id) as that string rather than its number or its
// bytes. Errors keep their message.
func readable(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindDuration:
		a.Value = slog.StringValue(a.Value.Duration().String())
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case error:
		case fmt.Stringer:
			a.Value = slog.StringValue(v.String())
		}
	}
	return a
}
