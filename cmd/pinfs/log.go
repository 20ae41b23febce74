package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/lineage"
)

var logCmd = &command{
	name:  "log",
	args:  "DIGEST --store STORE",
	short: "walk a manifest's parents (the hash chain), one manifest per line",
	long: `Print DIGEST and then its ancestors, breadth first, one manifest per line:
digest, depth, member count, bytes, purpose. Every manifest is verified
against its digest on the way; one that is missing or fails is printed as
such and makes the exit status 1.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		return func(ctx context.Context, args []string) error {
			d, st, err := snapshotArg(ctx, args, *storeURL, "exactly one DIGEST", 0)
			if err != nil {
				return err
			}
			failed := false
			err = lineage.Log(ctx, st, d, func(e lineage.Entry) {
				indent := strings.Repeat("  ", e.Depth)
				if e.Err != nil {
					failed = true
					fmt.Fprintf(out, "%s%s  FAIL %s\n", indent, e.Digest, oneLine(e.Err))
					return
				}
				m := e.Manifest
				fmt.Fprintf(out, "%s%s  members=%d bytes=%d parents=%d purpose=%q\n",
					indent, e.Digest, m.Members.Count, m.Members.Bytes, len(m.Parents), m.Purpose)
			})
			if err == nil && failed {
				err = errCheckFailed
			}
			return err
		}
	},
}
