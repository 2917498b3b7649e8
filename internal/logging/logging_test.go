package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "INFO": slog.LevelInfo, "warn": slog.LevelWarn,
		"warning": slog.LevelWarn, " error ": slog.LevelError,
	} {
		got, err := ParseLevel(in)
		if err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	_, err := ParseLevel("verbose")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "debug, info, warn, error") {
		t.Errorf("ParseLevel(verbose) = %v; want ErrInvalid listing the levels", err)
	}
}

func TestParseFormat(t *testing.T) {
	for _, in := range []string{"auto", "TEXT", "json"} {
		if _, err := ParseFormat(in); err != nil {
			t.Errorf("ParseFormat(%q): %v", in, err)
		}
	}
	if _, err := ParseFormat("xml"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseFormat(xml) = %v; want ErrInvalid", err)
	}
}

func TestNewWritesTheFormatAndFiltersTheLevel(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, FormatJSON, slog.LevelInfo)
	log.Debug("hidden")
	log.Info("node started", "listen", "127.0.0.1:7420")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	if rec["msg"] != "node started" || rec["listen"] != "127.0.0.1:7420" {
		t.Errorf("record = %v", rec)
	}

	buf.Reset()
	New(&buf, FormatText, slog.LevelDebug).Debug("shown", "k", "v")
	if got := buf.String(); !strings.Contains(got, "level=DEBUG") || !strings.Contains(got, "k=v") {
		t.Errorf("text line = %q", got)
	}
}

func TestAutoIsJSONWhenNotATerminal(t *testing.T) {
	// A regular file is what a redirected stderr looks like.
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Fatal("a regular file is not a terminal")
	}
	New(f, FormatAuto, slog.LevelInfo).Info("hello")
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(bytes.TrimSpace(b)) {
		t.Errorf("auto format to a file wrote %q; want JSON", b)
	}
	var buf bytes.Buffer
	if IsTerminal(&buf) {
		t.Error("a buffer is not a terminal")
	}
}
