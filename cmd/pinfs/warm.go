package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/mount"
	"github.com/pinfs/pinfs/cmd/internal/warm"
)

var warmCmd = &command{
	name:  "warm",
	args:  "DIGEST [PATH...] --store STORE [--cache-dir DIR] [flags]",
	short: "fetch and verify members into the disk cache before a mount (digests only)",
	long: `Fetch the members of snapshot DIGEST, verify every block against its
BLAKE3 digest, and put them in the disk cache of DIR, laid out as pinfs
mount lays it out: a mount that follows with the same --cache-dir reads
them at disk-cache speed, also with the store unreachable. Use it to warm
a node before training, e.g. from an init container.

PATH (a member or a directory of the snapshot; a leading "/" is accepted)
and --split limit what is warmed; without them the whole snapshot is. A
PATH or split that selects no member is refused with exit status 2 before
anything is fetched, and so is a selection larger than --cache-disk.
Blocks already in the cache are not fetched again.

Members are warmed --jobs at a time, with a progress bar on stderr. The
summary (members, bytes, bytes already cached and fetched, seconds, rate)
goes to stdout. Exit 0 when every selected member is in the cache; 1,
naming the member, when one could not be fetched or verified (content
that does not match its digest, a pinned version that is gone, a store
failure): as pinfs verify reports it. Nothing unverified is cached.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		fallbackURL := fallbackFlag(fs)
		cacheDir := fs.String("cache-dir", defaultCacheDir(), "the mount's cache `DIR`: blocks go to DIR/blocks, verified metadata to DIR/meta")
		split := fs.String("split", "", "warm only the members of this `SPLIT` (train, val, ...: the split pin recorded)")
		jobs := fs.Int("jobs", warm.DefaultJobs, "`N` members fetched in parallel")
		cacheDisk := byteSize(10 << 30)
		fs.Var(&cacheDisk, "cache-disk", "disk block cache budget `SIZE`, as on pinfs mount; the selection must fit in it")
		ra := readaheadFlags(fs)
		mem := memoryTargetFlag(fs)
		quiet := fs.Bool("quiet", false, "no progress bar")
		asJSON := fs.Bool("json", false, "print the summary as JSON")
		return func(ctx context.Context, args []string) error {
			if len(args) < 1 {
				return usagef("want DIGEST [PATH...], got no arguments")
			}
			d, err := parseSnapshot(args[0], *storeURL)
			if err != nil {
				return err
			}
			if *jobs < 1 {
				return usagef("--jobs %d: want at least 1", *jobs)
			}
			raMax, raBudget, err := ra.values()
			if err != nil {
				return err
			}
			target, err := mem.value()
			if err != nil {
				return err
			}
			if *cacheDir == "" {
				return errors.New("no default cache dir: $XDG_CACHE_HOME and $HOME are unset; pass --cache-dir DIR (a directory only this user can write)")
			}
			st, err := openReadStore(ctx, *storeURL, *fallbackURL)
			if err != nil {
				return err
			}
			if err := mount.PrepareCacheDir(*cacheDir); err != nil {
				return err
			}
			log := logFrom(ctx)
			c, err := warm.Open(ctx, st, d, *cacheDir, warm.Tuning{
				DiskBytes: int64(cacheDisk), ReadaheadMax: raMax, ReadaheadBudget: raBudget,
				MemoryTarget: target, ReadaheadBudgetSet: mem.given("readahead-budget"),
			}, log)
			if err != nil {
				return err
			}
			defer c.Close()
			sel, err := warm.Select(c.Snapshot.Table(), args[1:], *split)
			if err != nil {
				return usageError{fmt.Errorf("%s: %w", d, err)}
			}
			var bar io.Writer = os.Stderr
			if *quiet {
				bar = nil
			}
			s, err := warm.Run(ctx, c, sel, warm.Options{Jobs: *jobs, Progress: bar})
			if errors.Is(err, warm.ErrBudget) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(out, s)
			}
			_, err = fmt.Fprintf(out, "warmed %d members, %d bytes (%d already cached, %d fetched) in %.2f s, %.2f GB/s\n",
				s.Members, s.Bytes, s.CachedBytes, s.FetchedBytes, s.Seconds, s.GBps())
			return err
		}
	},
}
