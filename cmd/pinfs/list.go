package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/catalog"
	"github.com/pinfs/pinfs/verify"
)

var listCmd = &command{
	name:  "list",
	args:  "--store STORE [--policy FILE] [--json] [--jobs N]",
	short: "list the manifests in a store, newest first (the way back to a lost digest)",
	long: `List the manifests the store holds, newest first: pin time, digest,
admission state (as pinfs status reports it: BUILDING, VALIDATED, APPROVED
under --policy FILE, ACTIVE), members, bytes, parents (their count; --json
names them) and purpose.

A listing is the store's claim, so every manifest is read and listed only
when its bytes hash to its digest; a key under manifests/ that does not
verify is never listed but named in a warning on stderr (and under
"invalid" with --json), and makes the exit status 1. The time is the
store's (S3 LastModified, a file's mtime), not covered by the digest.
Member tables and members are not read: pinfs verify checks those.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		policyFile := policyFlag(fs)
		asJSON := fs.Bool("json", false, "print the listing as one JSON document: {store, manifests: [...], invalid: [...]}")
		jobs := fs.Int("jobs", 16, "read `N` manifests in parallel")
		return func(ctx context.Context, args []string) error {
			if len(args) != 0 {
				return usagef("want no arguments, got %d", len(args))
			}
			if *jobs < 1 {
				return usagef("--jobs %d: want at least 1", *jobs)
			}
			p, err := loadPolicy(*policyFile)
			if err != nil {
				return err
			}
			st, err := openStore(ctx, *storeURL)
			if err != nil {
				return err
			}
			l, err := catalog.List(ctx, st, catalog.Options{Jobs: *jobs, Policy: p})
			if err != nil {
				return err
			}
			for _, inv := range l.Invalid {
				logFrom(ctx).Warn("not listed: the key does not hold a valid manifest", "key", inv.Key, "reason", inv.Reason)
			}
			if *asJSON {
				err = printJSON(out, l)
			} else {
				err = printListing(out, l)
			}
			if err == nil && len(l.Invalid) > 0 {
				err = errCheckFailed
			}
			return err
		}
	},
}

// printListing prints the manifests of l as a table.
func printListing(w io.Writer, l *catalog.Listing) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tDIGEST\tSTATE\tMEMBERS\tBYTES\tPARENTS\tPURPOSE")
	for _, e := range l.Manifests {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", stamp(e.Time), e.Digest, e.State, e.Members, e.Bytes,
			len(e.Parents), verify.Printable(or(e.Purpose, "-")))
	}
	return tw.Flush()
}
