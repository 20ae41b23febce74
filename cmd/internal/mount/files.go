package mount

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/metrics"
	"github.com/pinfs/pinfs/fs"
	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/verify"
)

// blockMember converts verified member i of snapshot snap for the block
// reader. It is made for each read rather than kept for every member of
// the snapshot.
func blockMember(snap verify.Digest, ms *verify.Table, i int) (blocks.Member, error) {
	m := ms.Member(i)
	return blocks.MemberOf(snap, i, &m)
}

// files serves member i of the snapshot through the block reader and
// records what was read for the consumed set.
type files struct {
	digest  verify.Digest // the snapshot's
	blocks  *blocks.Reader
	members *verify.Table
	tracker *consumed.Tracker
	metrics *metrics.Metrics
	log     *slog.Logger
}

var (
	_ fs.Reader      = (*files)(nil)
	_ fs.SliceReader = (*files)(nil)
	_ fs.Opener      = (*files)(nil)
)

func (f *files) ReadAt(ctx context.Context, i int, p []byte, off int64) (int, error) {
	start := time.Now()
	m, err := blockMember(f.digest, f.members, i)
	if err != nil {
		return 0, err
	}
	n, err := f.blocks.ReadAt(ctx, &m, p, off)
	return n, f.done(start, i, off, n, err)
}

// Slices is ReadAt without the copy: the mount replies with the block
// reader's verified cached blocks as they are.
func (f *files) Slices(ctx context.Context, i int, off int64, n int) (fs.Slices, int, error) {
	start := time.Now()
	m, err := blockMember(f.digest, f.members, i)
	if err != nil {
		return new(blocks.Span), 0, err
	}
	sp, got, err := f.blocks.Slices(ctx, &m, off, n)
	return sp, got, f.done(start, i, off, got, err)
}

// done records a read of n bytes of member i at off that ended with err,
// for the consumed set and the metrics, and returns err with io.EOF
// dropped (the fs checks the count).
func (f *files) done(start time.Time, i int, off int64, n int, err error) error {
	if n > 0 {
		f.tracker.Read(i, off, int64(n))
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	f.metrics.ObserveRead(time.Since(start), n, err)
	return err
}

func (f *files) Opened(i int) { f.tracker.Opened(i) }
