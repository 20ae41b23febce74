package runs

import (
	"context"

	"github.com/pinfs/pinfs/cmd/internal/check"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

// Replay reads the members of t at indices members from st again, each at
// its pinned version (the exact S3 VersionId, or the CAS blob of its
// digest), and verifies each whole member against its BLAKE3 digest and
// its stored Bao outboard: the deep check of `pinfs verify` (check.Members),
// jobs members at a time (<= 0 means 16). progress, if not nil, is told
// after each member how many are done and the sum of their sizes.
//
// It returns the problems in the order of members, at most one per member:
// version_missing (the version is gone), size_mismatch, mismatch (other
// bytes), read_failed (the store could not be read), or bad_member (the
// table names no object to read). None means every member was reproduced
// byte for byte. An index out of range, or the end of ctx, is an error.
func Replay(ctx context.Context, st store.Store, t *verify.Table, members []int, jobs int, progress func(done int, bytes int64)) ([]verify.Problem, error) {
	return check.Members(ctx, st, t, members, check.Options{Deep: true, Jobs: jobs}, progress)
}
