package main

import (
	"fmt"
	"io"
	"log/slog"
)

// logFormat is --log-format: how the server writes its log (log/slog) on
// stderr, "text" (slog's key=value lines, the default) or "json" (one
// JSON object per line, for a log collector).
type logFormat string

func (f *logFormat) String() string { return string(*f) }

func (f *logFormat) Set(s string) error {
	if s != "text" && s != "json" {
		return fmt.Errorf("want text or json, got %q", s)
	}
	*f = logFormat(s)
	return nil
}

// newLogger is the server's logger writing to w in format f.
func newLogger(w io.Writer, f logFormat) *slog.Logger {
	if f == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}
