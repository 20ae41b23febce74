package blocks

import (
	"context"
	"errors"
	"os"
)

// TEMPORARY stub: branch backing builds the real Backing (whole-member
// cache files, verified before their first hand-over). The integrator
// deletes this file when it merges that branch; until then no member has
// a backing file and every open is served through ReadAt.

// errNoBacking is the stub's answer.
var errNoBacking = errors.New("blocks: no backing files in this build (stub)")

// Backing returns an open, verified whole-member file of m for FUSE
// passthrough, or an error when there is none. This stub always errs.
func (r *Reader) Backing(ctx context.Context, m *Member) (*os.File, error) {
	return nil, errNoBacking
}
