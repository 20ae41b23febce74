package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/lineage"
)

var deriveLogCmd = &command{
	name:  "log",
	args:  "DIGEST|KEY --store STORE [--json]",
	short: "show the derivation records that produced a snapshot, and those of its inputs",
	long: `Print the derivation records that produced DIGEST (an output digest, or
the derivation key of one record) and, depth first, those of each input:
the lineage as far as the store knows it, as a tree indented two spaces
per level. Each record shows its key, transform, time, command, params and
split, then each input as "input NAME: DIGEST" with its own lineage below.
An input that no record produced is "not derived", with the sources its
manifest was pinned from. A digest met again is "shown above"; the walk
stops 32 levels down.

Exit 1 when the store holds no record for DIGEST, when a record is invalid
(tampered with), or when an input's manifest cannot be read (after the
tree is printed); a manifest missing from the store is only noted.
With --json the tree is one JSON document (see docs/derive.md).`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		asJSON := fs.Bool("json", false, "print the lineage as one JSON document")
		return func(ctx context.Context, args []string) error {
			d, st, err := snapshotArg(ctx, args, *storeURL, "exactly one DIGEST or KEY", 0)
			if err != nil {
				return err
			}
			n, err := lineage.Derived(ctx, lineage.StoreRecords(st), d)
			if errors.Is(err, lineage.ErrNoRecord) {
				return fmt.Errorf("no derivation record for %s in store %s", d, *storeURL)
			}
			if err != nil {
				return err
			}
			if *asJSON {
				err = printJSON(out, n)
			} else {
				err = lineage.WriteDerived(out, n)
			}
			if err == nil && n.Unreadable() {
				err = errCheckFailed
			}
			return err
		}
	},
}
