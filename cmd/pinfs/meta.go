package main

import (
	"context"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/mount"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/metacache"
	"github.com/pinfs/pinfs/verify"
)

// metaHelp is the help of --cache-dir on a read-only command that loads
// a member table.
const metaHelp = "the mount's cache `DIR`, whose verified metadata (DIR/meta: manifests, member tables and their index) is reused and kept, as pinfs mount keeps it; \"\" reads the store only"

// metaFlags is the --cache-dir of a command that loads member tables
// without mounting (pinfs ls, verify, validate, diff, run show and
// replay): where it reads them from, as pinfs mount and warm do, so that
// a table verified once is not fetched, parsed and indexed again.
type metaFlags struct {
	fs  *pflag.FlagSet
	dir *string
}

// defineMetaFlags defines --cache-dir on fs.
func defineMetaFlags(fs *pflag.FlagSet) metaFlags {
	return metaFlags{fs: fs, dir: fs.String("cache-dir", defaultCacheDir(), metaHelp)}
}

// reader returns the metadata reader of st for this cache dir: a
// metacache.Cache in DIR/meta over st. Without a cache dir (no
// $XDG_CACHE_HOME nor $HOME, or --cache-dir "") it is st itself, as
// before there was a cache: a command that only reads must not fail for
// want of one.
//
// DIR gets mount's checks first (mount.PrepareCacheDir): a dir another
// user owns or may write could hold a planted index, which is checked
// only against itself. A --cache-dir given that fails them is refused as
// on pinfs mount; the default one that fails them is skipped with a
// warning, since the store can still answer.
func (f metaFlags) reader(ctx context.Context, st store.Store) (verify.Getter, error) {
	dir := *f.dir
	if dir == "" {
		return st, nil
	}
	log := logFrom(ctx)
	if err := mount.PrepareCacheDir(dir); err != nil {
		if f.fs.Changed("cache-dir") {
			return nil, err
		}
		log.Warn("reading the store without the default cache dir", "err", err)
		return st, nil
	}
	return metacache.New(filepath.Join(dir, "meta"), st, metacache.WithLogger(log)), nil
}
