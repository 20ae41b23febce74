package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/verify"
)

var lsCmd = &command{
	name:  "ls",
	args:  "DIGEST [PATH] --store STORE [--json]",
	short: "list the members of a snapshot without mounting it",
	long: `List the members of a verified snapshot: size, split, digest, source and
pinned version id, then the path. PATH limits the listing to one member or
one directory of the snapshot.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		asJSON := fs.Bool("json", false, "print the members as JSON Lines (the member table format)")
		return func(ctx context.Context, args []string) error {
			d, st, err := snapshotArg(ctx, args, *storeURL, "DIGEST [PATH]", 1)
			if err != nil {
				return err
			}
			snap, err := verify.Load(ctx, st, d)
			if err != nil {
				return err
			}
			var ms []verify.Member
			t := snap.Table()
			for i := range t.Len() {
				if len(args) == 1 || under(t.Path(i), args[1]) {
					ms = append(ms, t.Member(i))
				}
			}
			if len(args) == 2 && len(ms) == 0 {
				return fmt.Errorf("%s: no member at or under %q", d, args[1])
			}
			if *asJSON {
				var b []byte
				for i := range ms {
					b = append(ms[i].AppendCanonical(b), '\n')
				}
				_, err := out.Write(b)
				return err
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SIZE\tSPLIT\tDIGEST\tSOURCE\tVERSION\tPATH")
			for i := range ms {
				m := &ms[i]
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", m.Size, verify.Printable(or(m.Split, "-")), m.Digest,
					verify.Printable(source(m)), verify.Printable(or(m.VersionID(), "-")), verify.Printable(m.Path))
			}
			return tw.Flush()
		}
	},
}

// under reports whether member path p is dir or lies below it.
func under(p, dir string) bool {
	dir = strings.TrimSuffix(dir, "/")
	return dir == "" || p == dir || strings.HasPrefix(p, dir+"/")
}

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// source is m's source for the listing: the S3 location, or "cas" for
// bytes in the store's content-addressed area (named by the digest column).
func source(m *verify.Member) string {
	if m.S3 != nil {
		return m.Source()
	}
	return "cas"
}
