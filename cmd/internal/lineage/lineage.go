// Package lineage compares snapshots, walks their parent chain and their
// derivation records (`pinfs diff`, `pinfs log` and `pinfs derive log`).
package lineage

import (
	"context"

	"github.com/pinfs/pinfs/verify"
)

// Entry is one manifest in a parent walk.
type Entry struct {
	Digest   verify.Digest
	Depth    int
	Manifest *verify.Manifest // nil when Err is set
	Err      error
}

// Log walks the parents of d breadth first, each manifest once, and calls
// fn for each, starting with d itself. A manifest that cannot be fetched
// or fails its digest is reported through Entry.Err and not walked further.
func Log(ctx context.Context, g verify.Getter, d verify.Digest, fn func(Entry)) error {
	seen := map[verify.Digest]bool{d: true}
	queue := []Entry{{Digest: d}}
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := queue[0]
		queue = queue[1:]
		m, err := verify.FetchManifest(ctx, g, e.Digest) // bounded, and a missing one names pinfs list
		if err != nil {
			e.Err = err
			fn(e)
			continue
		}
		e.Manifest = m
		fn(e)
		for _, p := range e.Manifest.Parents {
			if !seen[p] {
				seen[p] = true
				queue = append(queue, Entry{Digest: p, Depth: e.Depth + 1})
			}
		}
	}
	return nil
}
