package main

import (
	"context"
	"log/slog"
	"os"
)

type loggerKey struct{}

// withLogger returns ctx carrying the command's logger.
func withLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// logFrom returns the command's logger (--log-format, --debug), or a text
// logger on stderr at info level when ctx carries none.
func logFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}
