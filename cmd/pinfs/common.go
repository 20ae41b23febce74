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

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
