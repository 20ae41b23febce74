package mount

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/pinfs/pinfs/cmd/internal/mountstatus"
	"github.com/pinfs/pinfs/fs"
)

// probeName is the file in the disk tier's directory whose registration
// as a backing file tells whether the kernel takes this mount's cache
// files: it is on the same file system as they are. The tier lists only
// its two-hex-digit subdirectories, so it never counts it.
const probeName = ".passthrough-probe"

// passthroughOf returns the mount's passthrough switch, for status and
// metrics, and the one the tree gets: nil, so that every open is served
// as before, when passthrough cannot be on (--passthrough=false, no disk
// tier); reason is then why, for the log and status.
func passthroughOf(c *Config) (pt, forTree *fs.Passthrough, reason string) {
	pt = &fs.Passthrough{}
	switch {
	case !c.Passthrough:
		reason = fs.ReasonDisabled
	case c.CacheDisk <= 0:
		reason = fs.ReasonNoDisk
	default:
		return pt, pt, ""
	}
	pt.Off(reason)
	return pt, nil, reason
}

// probePassthrough decides, once the mount serves, whether its opens may
// be handed backing files, turns pt on if so, and logs the outcome once:
// "passthrough on", or "passthrough off" with its reason. reason is
// passthroughOf's, "" when the probe is to decide. A probe file that
// cannot be made turns passthrough off too.
func probePassthrough(server *fuse.Server, pt *fs.Passthrough, dir, reason string, log *slog.Logger) {
	if reason == "" {
		reason = probeIn(server, pt, dir)
	}
	if reason != "" {
		log.Info("passthrough off", "reason", reason)
		return
	}
	log.Info("passthrough on")
}

// probeIn probes with the probe file in dir and returns the reason
// passthrough is off, "" when it is on.
func probeIn(server *fuse.Server, pt *fs.Passthrough, dir string) string {
	p := filepath.Join(dir, probeName)
	f, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o400)
	if err != nil {
		reason := "no probe file in the cache dir: " + err.Error()
		pt.Off(reason)
		return reason
	}
	defer f.Close()
	return pt.Probe(server, f)
}

// passthroughStatus converts pt's status for pinfs status.
func passthroughStatus(pt *fs.Passthrough) func() mountstatus.Passthrough {
	return func() mountstatus.Passthrough {
		s := pt.Status()
		return mountstatus.Passthrough{Enabled: s.Enabled, Reason: s.Reason, Opens: s.Opens, Bytes: s.Bytes}
	}
}

var _ fs.Backer = (*files)(nil)

// Backing returns member i's verified whole-member cache file, for the
// kernel to serve the open from, or false when the disk tier has none
// that checks out (the block reader then has recorded why, if it was a
// bad file): the open is served through ReadAt.
func (f *files) Backing(ctx context.Context, i int) (*os.File, bool) {
	m, err := blockMember(f.digest, f.members, i)
	if err != nil {
		return nil, false
	}
	bf, err := f.blocks.Backing(ctx, &m)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			f.log.Debug("no backing file: served through the daemon", "path", m.Path, "err", err)
		}
		return nil, false
	}
	return bf, true
}

// Recheck reports whether bf, member i's backing file handed over to
// opens still live, still holds the verified bytes (the block reader
// verifies it again if it changed, and records a file that fails).
func (f *files) Recheck(ctx context.Context, i int, bf *os.File) bool {
	m, err := blockMember(f.digest, f.members, i)
	if err != nil {
		return false
	}
	if err := f.blocks.Recheck(ctx, &m, bf); err != nil {
		f.log.Warn("a live backing file no longer checks out", "path", m.Path, "err", err)
		return false
	}
	return true
}

// PassedThrough records an open the kernel serves from member i's cache
// file: its reads never reach the daemon, so the member counts as opened
// and read in full, and is recorded as served by passthrough.
func (f *files) PassedThrough(i int) { f.tracker.PassedThrough(i) }
