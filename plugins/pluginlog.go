package plugins

import (
	"bytes"
	"context"
	"log/slog"
)

// stderrHead is how much of a call's standard error the host keeps to
// explain a trap: a Go guest prints its panic there first, then goroutine
// dumps.
const stderrHead = 1024

// pluginLog turns a plugin's output (the host's log function, and WASI
// standard output and error) into log records of the host's logger, one
// per line, bounded per call.
type pluginLog struct {
	logger  *slog.Logger
	partial map[string][]byte // per stream, a line not yet ended
	head    []byte            // the start of this call's stderr
	dropped bool              // the call's log budget ran out
	limit   int
}

func newPluginLog(logger *slog.Logger, limit int) pluginLog {
	return pluginLog{logger: logger, partial: map[string][]byte{}, limit: limit}
}

// begin resets the per-call state.
func (l *pluginLog) begin() {
	l.head = l.head[:0]
	l.dropped = false
}

// write takes bytes a guest wrote to stream ("stdout" or "stderr").
func (l *pluginLog) write(cs *callState, stream string, b []byte) {
	if stream == "stderr" && len(l.head) < stderrHead {
		l.head = append(l.head, b[:min(len(b), stderrHead-len(l.head))]...)
	}
	buf := append(l.partial[stream], b...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		l.message(cs, slog.LevelInfo, stream, buf[:i])
		buf = buf[i+1:]
	}
	if len(buf) > 4096 { // a line that never ends is logged in pieces
		l.message(cs, slog.LevelInfo, stream, buf)
		buf = buf[:0]
	}
	l.partial[stream] = append(l.partial[stream][:0], buf...)
}

// message logs one message, unless the call's log budget is spent.
func (l *pluginLog) message(cs *callState, level slog.Level, source string, msg []byte) {
	if cs.logBytes+len(msg) > l.limit {
		if !l.dropped {
			l.dropped = true
			l.logger.Warn("plugin log limit reached; dropping the rest of this call's output", "limit", l.limit)
		}
		return
	}
	cs.logBytes += len(msg)
	if l.logger.Enabled(context.Background(), level) {
		l.logger.Log(context.Background(), level, string(bytes.ToValidUTF8(msg, []byte("\uFFFD"))), "source", source)
	}
}

// flush logs what remains of unended lines.
func (l *pluginLog) flush(cs *callState) {
	for stream, buf := range l.partial {
		if len(buf) > 0 {
			l.message(cs, slog.LevelInfo, stream, buf)
			l.partial[stream] = buf[:0]
		}
	}
}

// stderr returns the start of this call's standard error up to the first
// goroutine dump, trimmed.
func (l *pluginLog) stderr() string {
	h := l.head
	if i := bytes.Index(h, []byte("\ngoroutine ")); i >= 0 {
		h = h[:i]
	}
	return string(bytes.ToValidUTF8(bytes.TrimSpace(h), []byte("\uFFFD")))
}
