package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/admission"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/dial"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

// openStore opens the --store URL; an empty URL is a usage error.
func openStore(ctx context.Context, url string) (store.Store, error) {
	if err := needStore(url); err != nil {
		return nil, err
	}
	return dial.Open(ctx, url)
}

// needStore is the usage error of a command run without --store (and
// without $PINFS_STORE), for a command that must say so before it opens
// the store (pinfs mount, before its daemon starts).
func needStore(url string) error {
	if url == "" {
		return usagef("--store is required (or set PINFS_STORE)")
	}
	return nil
}

// parseDigest parses a snapshot argument; anything but a full digest is a
// usage error.
func parseDigest(s string) (verify.Digest, error) {
	d, err := verify.ParseDigest(s)
	if errors.Is(err, verify.ErrNotDigest) {
		return "", usageError{err}
	}
	return d, err
}

// snapshotArg checks that args are a digest and at most extra more
// arguments, and opens the store.
func snapshotArg(ctx context.Context, args []string, storeURL, usage string, extra int) (verify.Digest, store.Store, error) {
	if len(args) < 1 || len(args) > 1+extra {
		return "", nil, usagef("want %s, got %d arguments", usage, len(args))
	}
	d, err := parseDigest(args[0])
	if err != nil {
		return "", nil, err
	}
	st, err := openStore(ctx, storeURL)
	return d, st, err
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// policyFlag defines --policy on fs.
func policyFlag(fs *pflag.FlagSet) *string {
	return fs.String("policy", "", "trust policy `FILE`: {\"approvers\": [\"alice.pub\", ...], \"threshold\": 1} (see docs/admission.md)")
}

// loadPolicy loads the policy file at path, or returns nil for "".
func loadPolicy(path string) (*sign.Policy, error) {
	if path == "" {
		return nil, nil
	}
	return sign.LoadPolicy(path)
}

// approval is the outcome of checking a snapshot's approvals under a
// policy (pinfs verify --policy).
type approval struct {
	Policy    verify.Digest `json:"policy"`
	Approved  bool          `json:"approved"`
	Reason    string        `json:"reason,omitempty"`
	Approvers []string      `json:"approvers"` // key ids that count
}

// checkApproval checks snapshot d's approvals under policy p.
func checkApproval(ctx context.Context, st store.Blobs, d verify.Digest, p *sign.Policy) *approval {
	a := &approval{Policy: p.Digest(), Approvers: []string{}}
	sigs, err := admission.Approved(ctx, st, d, p)
	for _, s := range sigs {
		a.Approvers = append(a.Approvers, s.KeyID)
	}
	a.Approved = err == nil
	if err != nil {
		a.Reason = oneLine(err)
	}
	return a
}

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
