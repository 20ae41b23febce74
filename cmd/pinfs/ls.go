package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"iter"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/verify"
)

var lsCmd = &command{
	name:  "ls",
	args:  "DIGEST [PATH] --store STORE [--cache-dir DIR] [--long] [--json]",
	short: "list the members of a snapshot without mounting it",
	long: `List the members of a verified snapshot: size, split, digest, pinned
version id, then the path. PATH limits the listing to one member or one
directory of the snapshot.

The listing fits 120 columns: digests are shortened to 12 hex digits and
version ids to 15 characters ("…" marks a cut), a member pinned from a
directory (into this store's content-addressed area, whose key is its
digest) shows "cas" as its source, and the SOURCE column is left out when
every other S3 member's key is one prefix followed by its path in one
bucket, as pin s3://BUCKET/PREFIX/ makes them (a member of a local
store's area then shows "cas" as its version). --long prints every field
in full, with the SOURCE column; --json prints the member table itself.

The member table is read through the cache dir's verified metadata, as
pinfs mount reads it: a table a mount or an earlier ls verified is not
fetched or indexed again.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		long := fs.Bool("long", false, "print full digests, version ids and the source of every member")
		asJSON := fs.Bool("json", false, "print the members as JSON Lines (the member table format)")
		meta := defineMetaFlags(fs)
		return func(ctx context.Context, args []string) error {
			d, st, err := snapshotArg(ctx, args, *storeURL, "DIGEST [PATH]", 1)
			if err != nil {
				return err
			}
			g, err := meta.reader(ctx, st)
			if err != nil {
				return err
			}
			snap, err := verify.Load(ctx, g, d)
			if err != nil {
				return err
			}
			t, dir := snap.Table(), ""
			if len(args) == 2 {
				dir = args[1]
			}
			// A Member per line, built as it is printed: a listing of ten
			// million members holds no list of them.
			ms := func(yield func(*verify.Member) bool) {
				for i := range subtree(t, dir) {
					if m := t.Member(i); !yield(&m) {
						return
					}
				}
			}
			if len(args) == 2 && isEmpty(ms) {
				return fmt.Errorf("%s: no member at or under %q", d, args[1])
			}
			if *asJSON {
				return printCanonical(out, ms)
			}
			if *long {
				return printMembersLong(out, ms)
			}
			return printMembers(out, ms, st.String())
		}
	},
}

// isEmpty reports whether ms yields nothing.
func isEmpty[T any](ms iter.Seq[T]) bool {
	for range ms {
		return false
	}
	return true
}

// printCanonical is pinfs ls --json: the members' table lines, written
// as they are made.
func printCanonical(w io.Writer, ms iter.Seq[*verify.Member]) error {
	bw := bufio.NewWriter(w)
	var b []byte
	for m := range ms {
		b = append(m.AppendCanonical(b[:0]), '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// printMembersLong is pinfs ls --long: every field in full.
func printMembersLong(w io.Writer, ms iter.Seq[*verify.Member]) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SIZE\tSPLIT\tDIGEST\tSOURCE\tVERSION\tPATH")
	for m := range ms {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", m.Size, verify.Printable(or(m.Split, "-")), m.Digest,
			verify.Printable(source(m)), verify.Printable(or(m.VersionID(), "-")), verify.Printable(m.Path))
	}
	return tw.Flush()
}

// printMembers is pinfs ls of a snapshot in store storeURL: short digests
// and version ids, and SOURCE only where it says more than PATH or
// DIGEST, so that a line fits 120 columns. It walks ms twice.
func printMembers(w io.Writer, ms iter.Seq[*verify.Member], storeURL string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	implied := impliedSource(ms, storeURL)
	if implied {
		fmt.Fprintln(tw, "SIZE\tSPLIT\tDIGEST\tVERSION\tPATH")
	} else {
		fmt.Fprintln(tw, "SIZE\tSPLIT\tDIGEST\tSOURCE\tVERSION\tPATH")
	}
	for m := range ms {
		version := "-"
		if implied && m.S3 == nil {
			version = "cas" // SOURCE, which would say so, is left out
		}
		if m.S3 != nil {
			version = shorten(or(m.S3.VersionID, "-"), shortVersion)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t", m.Size, verify.Printable(or(m.Split, "-")), shortDigest(m.Digest))
		if !implied {
			src := "cas" // its key, cas/blake3/<hex>, is DIGEST
			if !inCAS(m, storeURL) {
				src = source(m)
			}
			fmt.Fprintf(tw, "%s\t", verify.Printable(src))
		}
		fmt.Fprintf(tw, "%s\t%s\n", verify.Printable(version), verify.Printable(m.Path))
	}
	return tw.Flush()
}

// shortVersion is how many characters of a version id pinfs ls shows.
const shortVersion = 15

// shortDigest is d with its hex cut to 12 digits, as git shortens a hash.
func shortDigest(d string) string {
	alg, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) <= 12 {
		return verify.Printable(d)
	}
	return verify.Printable(alg + ":" + hex[:12])
}

// shorten cuts s to n characters, the last of them "…", when it is longer.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// impliedSource reports whether every S3 member of ms is the object
// PREFIX+path of one BUCKET and PREFIX (as pin s3://BUCKET/PREFIX makes
// them), so that a SOURCE column would only repeat PATH; members in a
// content-addressed area (inCAS) do not count. It is false when no such
// member is in S3.
func impliedSource(ms iter.Seq[*verify.Member], storeURL string) bool {
	common := ""
	for m := range ms {
		if inCAS(m, storeURL) {
			continue
		}
		p, found := strings.CutSuffix(m.S3.Key, m.Path)
		if !found || p != "" && !strings.HasSuffix(p, "/") {
			return false
		}
		if p = m.S3.Bucket + "/" + p; common == "" {
			common = p
		} else if p != common {
			return false
		}
	}
	return common != ""
}

// inCAS reports whether m's bytes are in the content-addressed area of
// the store at storeURL, so that its source says no more than its digest:
// a local store's (no S3 source), or an S3 store's, where a member pinned
// from a directory (pinfs pin DIR, the output of pinfs derive) is the
// object storeURL/cas/blake3/<hex of its digest> at the version its upload
// made. Another bucket's or prefix's cas/ key is a source like any other.
func inCAS(m *verify.Member, storeURL string) bool {
	if m.S3 == nil {
		return true
	}
	hex, ok := strings.CutPrefix(m.Digest, "blake3:")
	return ok && m.Source() == strings.TrimSuffix(storeURL, "/")+"/"+verify.CASKey(hex)
}

// subtree yields, in table order, the members of t whose path is dir or
// lies below it; every member for "". A verified table is sorted by path,
// so these are the member named dir and the run of paths from dir+"/" up
// to dir+"0" ('0' follows '/'), both found by binary search: listing one
// directory of ten million members reads a few dozen paths besides its own.
func subtree(t *verify.Table, dir string) iter.Seq[int] {
	return func(yield func(int) bool) {
		dir = strings.TrimSuffix(dir, "/")
		lo, hi := 0, t.Len()
		if dir != "" {
			at := func(p string) int { return sort.Search(t.Len(), func(i int) bool { return t.Path(i) >= p }) }
			if i := at(dir); i < t.Len() && t.Path(i) == dir && !yield(i) {
				return
			}
			lo, hi = at(dir+"/"), at(dir+"0")
		}
		for i := lo; i < hi; i++ {
			if !yield(i) {
				return
			}
		}
	}
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
