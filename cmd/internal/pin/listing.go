package pin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

// ErrChanged is wrapped by the error of an S3 pin whose prefix changed
// between the listing it started from and the listing it took after
// hashing: added or deleted keys, or a key with a new current version.
var ErrChanged = errors.New("changed while it was pinned")

// maxChanges is how many changed keys the error of an unsettled pin names.
const maxChanges = 10

// relist lists bucket/prefix again, after every object of first was
// hashed, and fails naming the keys that differ: the pin is written only
// when both listings name the same keys at the same current versions, so
// every pinned object held its pinned version from the first listing to
// the second and the snapshot is the prefix as it stood between them.
func (p *Pinner) relist(ctx context.Context, bucket, prefix string, first []store.ObjectVersion) error {
	second, err := p.Lister.ListCurrent(ctx, bucket, prefix)
	if err != nil {
		return fmt.Errorf("s3://%s/%s: listing again after hashing: %w", bucket, prefix, err)
	}
	if diff := changes(first, second); len(diff) > 0 {
		return fmt.Errorf("s3://%s/%s: %w: %s; pin again", bucket, prefix, ErrChanged, nameChanges(diff))
	}
	return nil
}

// changes returns one entry per key whose current version differs between
// listings a and b: "added KEY", "deleted KEY" or "new version of KEY",
// grouped in that order and sorted by key within each group.
func changes(a, b []store.ObjectVersion) []string {
	before := make(map[string]string, len(a))
	for _, v := range a {
		before[v.Key] = v.VersionID
	}
	var added, deleted, changed []string
	for _, v := range b {
		was, ok := before[v.Key]
		switch {
		case !ok:
			added = append(added, v.Key)
		case was != v.VersionID:
			changed = append(changed, v.Key)
		}
		delete(before, v.Key)
	}
	for k := range before {
		deleted = append(deleted, k)
	}
	var out []string
	for _, g := range []struct {
		verb string
		keys []string
	}{{"added ", added}, {"deleted ", deleted}, {"new version of ", changed}} {
		slices.Sort(g.keys)
		for _, k := range slices.Compact(g.keys) {
			out = append(out, g.verb+verify.Printable(k))
		}
	}
	return out
}

// nameChanges joins up to maxChanges entries and counts the rest.
func nameChanges(diff []string) string {
	if len(diff) <= maxChanges {
		return strings.Join(diff, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(diff[:maxChanges], ", "), len(diff)-maxChanges)
}
