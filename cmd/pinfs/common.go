package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/admission"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/dial"
	"github.com/pinfs/pinfs/store/fallback"
	"github.com/pinfs/pinfs/store/gate"
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

// fallbackFlag is --fallback-store of pinfs mount and warm.
func fallbackFlag(fs *pflag.FlagSet) *string {
	return fs.String("fallback-store", "", "`STORE` (s3://bucket/prefix, as the origin's) to read from while the --store tier (http(s)://) does not answer; it needs that store's credentials. Without it a tier that is down fails reads as a store that is down does")
}

// checkFallback is the usage error of a --fallback-store without an HTTP
// --store: only a tier has a fallback.
func checkFallback(storeURL, fallbackURL string) error {
	switch {
	case fallbackURL == "":
		return nil
	case !contentOnly(storeURL):
		return usagef("--fallback-store %s: only an http(s):// --store (a cache tier) has a fallback; --store is %q", fallbackURL, storeURL)
	case fallbackURL == storeURL:
		return usagef("--fallback-store %s: the same store as --store", fallbackURL)
	}
	return nil
}

// openReadStore opens the --store URL and, with a --fallback-store
// fallbackURL, wraps it so that reads go to the fallback while the tier
// does not answer (store/fallback).
func openReadStore(ctx context.Context, storeURL, fallbackURL string) (store.Store, error) {
	if err := checkFallback(storeURL, fallbackURL); err != nil {
		return nil, err
	}
	st, err := openStore(ctx, storeURL)
	if err != nil || fallbackURL == "" {
		return st, err
	}
	fb, err := dial.Open(ctx, fallbackURL)
	if err != nil {
		return nil, fmt.Errorf("--fallback-store: %w", err)
	}
	primary, ok := st.(fallback.Primary)
	if !ok {
		return nil, fmt.Errorf("--store %s reads no member by content: it cannot have a fallback", storeURL)
	}
	return fallback.New(primary, fb, logFrom(ctx)), nil
}

// contentOnly reports whether url names an HTTP store (a cache tier or a
// pinfs origin), which reads members by content and has no objects to HEAD.
func contentOnly(url string) bool {
	return strings.HasPrefix(url, "http://") || strings.HasPrefix(url, "https://")
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

// parseDigest parses a digest argument (a manifest, a report, a parent);
// anything but a full digest is a usage error, which asks "did you mean
// sha256:<hex>?" when the argument is one but for its form (a bare 64-hex
// digest, upper-case hex).
func parseDigest(s string) (verify.Digest, error) {
	d, err := verify.ParseDigest(s)
	if errors.Is(err, verify.ErrNotDigest) {
		return "", usageError{withHint(err, meantDigest(s))}
	}
	return d, err
}

// parseSnapshot parses the snapshot argument of a command that reads
// store storeURL (the --store value, "" when unset). Anything but a full
// digest is a usage error that names the next command where it can tell
// what was meant: sha256: before a bare digest, pinfs resolve for what
// may be an alias, pinfs list for a digest prefix.
func parseSnapshot(s, storeURL string) (verify.Digest, error) {
	d, err := verify.ParseDigest(s)
	if !errors.Is(err, verify.ErrNotDigest) {
		return d, err
	}
	return "", usageError{withHint(err, snapshotHint(s, storeURL))}
}

// snapshotHint is parseSnapshot's hint for s, which is not a digest, or ""
// when it cannot tell what was meant.
func snapshotHint(s, storeURL string) string {
	h, prefixed := cutDigestPrefix(s)
	switch hint := meantDigest(s); {
	case hint != "":
		return hint
	case prefixed && h != "" && len(h) < 64 && isHex(strings.ToLower(h)):
		return "a digest prefix is not a name: " + listCommand(storeURL) + " lists the full digests"
	case !prefixed && gate.CheckName(s) == nil:
		return "if " + s + " is an alias, resolve it first: pinfs resolve " + s + " --store " + storeArg(storeURL)
	}
	return ""
}

// inputsHint is snapshotHint for the first NAME=DIGEST value of vals
// (pinfs derive --input) whose DIGEST is not one.
func inputsHint(vals []string, storeURL string) string {
	for _, v := range vals {
		if _, digest, ok := strings.Cut(v, "="); ok {
			if _, err := verify.ParseDigest(digest); err != nil {
				return snapshotHint(digest, storeURL)
			}
		}
	}
	return ""
}

// meantDigest returns "did you mean sha256:<hex>?" for s that is a full
// digest but for its form: 64 hex digits without sha256:, or in upper case.
func meantDigest(s string) string {
	h, _ := cutDigestPrefix(s)
	if h = strings.ToLower(h); len(h) == 64 && isHex(h) {
		return "did you mean sha256:" + h + "?"
	}
	return ""
}

// cutDigestPrefix returns s without a leading "sha256:" in any case, and
// whether it had one.
func cutDigestPrefix(s string) (string, bool) {
	if len(s) >= 7 && strings.EqualFold(s[:7], "sha256:") {
		return s[7:], true
	}
	return s, false
}

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// listCommand is the pinfs list command line for store storeURL.
func listCommand(storeURL string) string { return "pinfs list --store " + storeArg(storeURL) }

// storeArg is storeURL as a shell word for a hint, or STORE when unset.
func storeArg(storeURL string) string {
	if storeURL == "" {
		return "STORE"
	}
	for _, c := range storeURL {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/._-:@+=,", c)) {
			return "'" + strings.ReplaceAll(storeURL, "'", `'\''`) + "'"
		}
	}
	return storeURL
}

// withHint appends hint to err's message ("err; hint"), keeping err in
// the chain and a usage error a usage error. An empty hint returns err.
func withHint(err error, hint string) error {
	if hint == "" {
		return err
	}
	var ue usageError
	if errors.As(err, &ue) {
		return usageError{fmt.Errorf("%w; %s", ue.error, hint)}
	}
	return fmt.Errorf("%w; %s", err, hint)
}

// snapshotArg checks that args are a snapshot digest (parseSnapshot) and
// at most extra more arguments, and opens the store.
func snapshotArg(ctx context.Context, args []string, storeURL, usage string, extra int) (verify.Digest, store.Store, error) {
	if len(args) < 1 || len(args) > 1+extra {
		return "", nil, usagef("want %s, got %d arguments", usage, len(args))
	}
	d, err := parseSnapshot(args[0], storeURL)
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

// logLevel is the level cmd logs at without --debug: info for pinfs mount
// and pinfs serve,
// whose log is the daemon's account of what it served, and warn for the
// others, whose result is their output.
func logLevel(cmd string) slog.Level {
	if cmd == "mount" || cmd == "serve" {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}
