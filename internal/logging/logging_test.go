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
	"time"
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

type kindForTest uint8

func (k kindForTest) String() string { return "commit-policy" }

type digestForTest [4]byte

func (d digestForTest) String() string { return "0a0b0c0d" }

// Durations, kinds and digests read the same in both formats: "30s", not
// 30000000000; "commit-policy", not 2; hex, not a list of bytes.
func TestValuesAreWrittenForPeople(t *testing.T) {
	for _, format := range []Format{FormatJSON, FormatText} {
		var b bytes.Buffer
		New(&b, format, slog.LevelInfo).Info("plugin added", "timeout", 30*time.Second, "poll", 100*time.Millisecond,
			"kind", kindForTest(2), "digest", digestForTest{10, 11, 12, 13}, "err", errors.New("boom"))
		out := b.String()
		for _, want := range []string{"30s", "100ms", "commit-policy", "0a0b0c0d", "boom"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: %q lacks %q", format, out, want)
			}
		}
		for _, bad := range []string{"30000000000", "100000000", "[10,11,12,13]", "[10 11 12 13]"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s: %q shows %q", format, out, bad)
			}
		}
	}
}
