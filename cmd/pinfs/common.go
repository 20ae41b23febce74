package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/dial"
	"github.com/pinfs/pinfs/verify"
)

// openStore opens the --store URL; an empty URL is a usage error.
func openStore(ctx context.Context, url string) (store.Store, error) {
	if url == "" {
		return nil, usagef("--store is required (or set PINFS_STORE)")
	}
	return dial.Open(ctx, url)
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
