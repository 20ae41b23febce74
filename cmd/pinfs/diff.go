package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/lineage"
	"github.com/pinfs/pinfs/verify"
)

var diffCmd = &command{
	name:  "diff",
	args:  "A B --store STORE [--cache-dir DIR] [--json]",
	short: "list members added, removed, changed and moved between splits",
	long: `Compare snapshot A with snapshot B, both verified first. Members match by
path: "changed" means another digest, size, source or version at the same
path; "moved" means the same bytes in another split (at the same path, or
removed from one split and added with the same digest in another). Counts
come last. Exit 0 whether or not the snapshots differ.

Both member tables are read through the cache dir's verified metadata, as
pinfs mount reads them, and walked side by side in path order.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		asJSON := fs.Bool("json", false, "print the diff as JSON")
		meta := defineMetaFlags(fs)
		return func(ctx context.Context, args []string) error {
			if len(args) != 2 {
				return usagef("want two digests A B, got %d arguments", len(args))
			}
			var ds [2]verify.Digest
			for i, a := range args {
				var err error
				if ds[i], err = parseSnapshot(a, *storeURL); err != nil {
					return err
				}
			}
			st, err := openStore(ctx, *storeURL)
			if err != nil {
				return err
			}
			g, err := meta.reader(ctx, st)
			if err != nil {
				return err
			}
			var snaps [2]*verify.Snapshot
			for i, d := range ds {
				if snaps[i], err = verify.Load(ctx, g, d); err != nil {
					return err
				}
			}
			df := lineage.Compare(snaps[0].Digest(), snaps[1].Digest(), snaps[0].Table(), snaps[1].Table())
			if *asJSON {
				return printJSON(out, df)
			}
			fmt.Fprintf(out, "--- %s\n+++ %s\n", df.From, df.To)
			for _, c := range df.Added {
				fmt.Fprintf(out, "+ %s  %s %s\n", c.Path, c.To.Digest, splitOf(c.To))
			}
			for _, c := range df.Removed {
				fmt.Fprintf(out, "- %s  %s %s\n", c.Path, c.From.Digest, splitOf(c.From))
			}
			for _, c := range df.Changed {
				fmt.Fprintf(out, "~ %s  %s@%s -> %s@%s\n", c.Path, c.From.Digest, or(c.From.VersionID(), "cas"), c.To.Digest, or(c.To.VersionID(), "cas"))
			}
			for _, c := range df.Moved {
				fmt.Fprintf(out, "> %s  split %s -> %s (from %s)\n", c.Path, or(c.From.Split, "-"), or(c.To.Split, "-"), c.From.Path)
			}
			fmt.Fprintf(out, "added %d, removed %d, changed %d, moved %d\n",
				df.Counts["added"], df.Counts["removed"], df.Counts["changed"], df.Counts["moved"])
			return nil
		}
	},
}

func splitOf(m *verify.Member) string {
	if m.Split == "" {
		return ""
	}
	return "[" + m.Split + "]"
}
