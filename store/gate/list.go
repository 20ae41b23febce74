package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
	"github.com/pinfs/pinfs/verify/jcs"
)

// listsPrefix is where revocation and benchmark lists are stored.
const listsPrefix = "lists/sha256/"

// snapshotPrefix starts a snapshot (manifest) digest, never a member's.
const snapshotPrefix = "sha256:"

// ListKey is the store key of the revocation or benchmark list with digest d.
func ListKey(d verify.Digest) string { return listsPrefix + d.Hex() }

// CheckEntry returns an error, one line naming e, unless e may be an entry
// of a revocation or benchmark list. An entry that starts with "blake3:"
// in any letter case is a member's digest and must be canonical, blake3:
// and 64 lower-case hex digits, the only form a member's digest takes in
// a valid snapshot: any other spelling would be kept and never match.
// An entry that starts with "sha256:" is refused: that is how a snapshot
// digest is written, which a list of members can never match (a pasted
// manifest digest would be kept and do nothing). Any other entry is a
// member id, matched exactly: non-empty UTF-8 without control characters.
func CheckEntry(e string) error {
	switch {
	case e == "" || !utf8.ValidString(e):
		return fmt.Errorf("entry %q is empty or not UTF-8", e)
	case strings.ContainsFunc(e, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("control character in entry %q", verify.Printable(e))
	case len(e) >= len(b3.Prefix) && strings.EqualFold(e[:len(b3.Prefix)], b3.Prefix):
		if _, err := b3.Parse(e); err != nil {
			return fmt.Errorf("entry %q: a member digest is written blake3:<64 lower-case hex>", verify.Printable(e))
		}
	case len(e) >= len(snapshotPrefix) && strings.EqualFold(e[:len(snapshotPrefix)], snapshotPrefix):
		return fmt.Errorf("entry %q is a snapshot digest: a list names members, by id or blake3:<64 lower-case hex>", verify.Printable(e))
	}
	return nil
}

// PutList stores a revocation or benchmark list, content addressed: the
// entries (member ids or "blake3:<hex>" digests) sorted and without
// repeats, as a canonical JSON array of strings. It returns the list's
// digest and its number of entries. An entry CheckEntry refuses is
// refused.
func PutList(ctx context.Context, b store.Blobs, entries []string) (verify.Digest, int, error) {
	list := slices.Clone(entries)
	slices.Sort(list)
	list = slices.Compact(list)
	if list == nil {
		list = []string{}
	}
	for _, e := range list {
		if err := CheckEntry(e); err != nil {
			return "", 0, fmt.Errorf("gate: list: %w", err)
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
// digest, a canonical JSON array of entries CheckEntry accepts, sorted
// and without repeats. The list is a claim of the store: a non-canonical
// digest in it is refused, not kept as an entry that never matches.
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
		if err := CheckEntry(e); err != nil {
			return nil, fmt.Errorf("gate: list %s: entry %d: %w", d, i, err)
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
