package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/pflag"
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

// logFlags defines --log-format and --debug on fs, each unless the command
// already defined it (pinfs mount's --debug also logs every FUSE request).
func logFlags(fs *pflag.FlagSet) {
	if fs.Lookup("log-format") == nil {
		def := os.Getenv("PINFS_LOG_FORMAT")
		if def == "" {
			def = "text"
		}
		fs.String("log-format", def, "log `FORMAT` on stderr: text or json ($PINFS_LOG_FORMAT sets the default)")
	}
	if fs.Lookup("debug") == nil {
		fs.Bool("debug", false, "log at debug level, with the full detail of errors")
	}
}

// newLogger returns the logger that the parsed flags in fs ask for: a slog
// text or JSON handler on w, at debug level with --debug and otherwise at
// the command's own level (logLevel). A --log-format other than text or
// json is a usage error.
func newLogger(fs *pflag.FlagSet, w io.Writer, cmd string) (*slog.Logger, error) {
	format := fs.Lookup("log-format")
	opts := &slog.HandlerOptions{Level: logLevel(cmd)}
	if debug := fs.Lookup("debug"); debug != nil && debug.Value.String() == "true" {
		opts.Level = slog.LevelDebug
	}
	switch v := format.Value.String(); v {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		if !format.Changed && os.Getenv("PINFS_LOG_FORMAT") == v {
			return nil, usagef("$PINFS_LOG_FORMAT %s: want text or json", v)
		}
		return nil, usagef("--log-format %s: want text or json", v)
	}
}

// logLevel is the level cmd logs at without --debug: info for pinfs mount,
// whose log is the daemon's account of what it served, and warn for the
// others, whose result is their output.
func logLevel(cmd string) slog.Level {
	if cmd == "mount" {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}
