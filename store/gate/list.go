package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
)

// listsPrefix is where revocation and benchmark lists are stored.
const listsPrefix = "lists/sha256/"

// ListKey is the store key of the revocation or benchmark list with digest d.
func ListKey(d verify.Digest) string { return listsPrefix + d.Hex() }

// PutList stores a revocation or benchmark list, content addressed: the
// entries (member ids or "blake3:<hex>" digests) sorted and without
// repeats, as a canonical JSON array of strings. It returns the list's
// digest and its number of entries. An empty entry is refused.
func PutList(ctx context.Context, b store.Blobs, entries []string) (verify.Digest, int, error) {
	list := slices.Clone(entries)
	slices.Sort(list)
	list = slices.Compact(list)
	if list == nil {
		list = []string{}
	}
	for _, e := range list {
		if e == "" || !utf8.ValidString(e) {
			return "", 0, fmt.Errorf("gate: list: entry %q is empty or not UTF-8", e)
		}
	}
	data, err := encodeList(list)
	if err != nil {
		return "", 0, err
	}
	d := verify.SHA256(data)
	if err := b.Put(ctx, ListKey(d), data); err != nil {
		return "", 0, fmt.Errorf("gate: store list: %w", err)
	}
	return d, len(list), nil
}

// GetList fetches the list with digest d and checks it: bytes of that
// digest, a canonical JSON array of non-empty strings, sorted and without
// repeats.
func GetList(ctx context.Context, b store.Blobs, d verify.Digest) ([]string, error) {
	if _, err := verify.ParseDigest(string(d)); err != nil {
		return nil, fmt.Errorf("gate: list: %w", err)
	}
	data, err := b.Get(ctx, ListKey(d))
	if err != nil {
		return nil, fmt.Errorf("gate: list %s: %w", d, err)
	}
	if got := verify.SHA256(data); got != d {
		return nil, fmt.Errorf("gate: list %s: the stored bytes have digest %s (tampered)", d, got)
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("gate: list %s: %w", d, err)
	}
	if list == nil {
		return nil, fmt.Errorf("gate: list %s: not a JSON array", d)
	}
	for i, e := range list {
		if e == "" || i > 0 && list[i-1] >= e {
			return nil, fmt.Errorf("gate: list %s: entry %d (%q) is empty, out of order or repeated", d, i, e)
		}
	}
	if again, err := encodeList(list); err != nil || !bytes.Equal(again, data) {
		return nil, fmt.Errorf("gate: list %s: not canonical JSON", d)
	}
	return list, nil
}

// encodeList returns the canonical JSON of a list.
func encodeList(list []string) ([]byte, error) {
	data, err := jcs.Marshal(list)
	if err != nil {
		return nil, fmt.Errorf("gate: list: %w", err)
	}
	return data, nil
}
