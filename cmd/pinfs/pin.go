package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/pin"
	"github.com/pinfs/pinfs/store/dial"
	"github.com/pinfs/pinfs/verify"
)

var pinCmd = &command{
	name:  "pin",
	args:  "SOURCE --store STORE [flags]",
	short: "pin a bucket prefix or a directory into a new manifest",
	long: `Pin SOURCE into a new immutable manifest and print its digest as the
last line of stdout.

SOURCE s3://BUCKET/PREFIX/ pins the current version of every object under
the prefix: the bucket must have versioning enabled, every object is read
once at its exact version to compute its BLAKE3 digest and Bao outboard,
and mount paths are the keys relative to the prefix. Once every object
is hashed the prefix is listed again: a key added, deleted or overwritten
while the pin ran fails it, naming the keys, and nothing is written, so a
manifest is always the prefix as it stood between the two listings. A
bucket without versioning, a "null" version, or a version that disappears
while pinning fails the pin and names the keys.

--transform names the code or image that produced the members by an
immutable digest, NAME@sha256:<64 hex> or NAME@<40 or 64 hex commit>; a
tag alone (registry/harvest:v1) is refused with exit 2.

SOURCE DIR copies the regular files under DIR into the store's
content-addressed area and pins them. Symbolic links and special files are
refused. A file replaced (by a link, a FIFO or another file) or changed
while it is pinned fails the pin and is named. The store hashes what it
writes and never reuses a blob it has not re-hashed. Paths with control
characters are refused.

Pinning the same source versions with the same flags gives the same digest.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		parents := fs.StringArray("parent", nil, "`DIGEST` of an earlier manifest this one derives from (repeatable)")
		purpose := fs.String("purpose", "", "what the snapshot is for, e.g. support-model-training-v3")
		split := fs.String("split", "dir", "split `RULE`: dir (first path component if train, val, validation or test), dir:NAME,NAME..., or none")
		transform := fs.String("transform", "", "code or image that produced the members, pinned by digest: NAME@sha256:<64 hex> or NAME@<commit hex>")
		recordSchema := fs.String("record-schema", "", "digest of the record schema")
		selection := fs.String("selection-policy", "", "digest of the selection policy")
		tombstone := fs.Int64("tombstone-watermark", 0, "deletion/revocation watermark the sources were read at")
		fence := fs.Int64("benchmark-fence", 0, "benchmark fence the selection respected")
		jobs := fs.Int("jobs", 8, "objects read and hashed in parallel")
		return func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usagef("want exactly one SOURCE, got %d arguments", len(args))
			}
			if err := pin.CheckTransform(*transform); err != nil {
				return usageError{err}
			}
			p := &pin.Pinner{Options: pin.Options{
				Purpose: *purpose, Transform: *transform, RecordSchema: *recordSchema,
				SelectionPolicy: *selection, Jobs: *jobs,
			}}
			if fs.Changed("tombstone-watermark") {
				p.TombstoneWatermark = tombstone
			}
			if fs.Changed("benchmark-fence") {
				p.BenchmarkFence = fence
			}
			var err error
			if p.Split, err = pin.ParseSplitRule(*split); err != nil {
				return usageError{err}
			}
			for _, s := range *parents {
				d, err := parseDigest(s)
				if err != nil {
					return err
				}
				p.Parents = append(p.Parents, d)
			}
			if isTerminal(os.Stderr) {
				p.Progress = &pin.Progress{W: os.Stderr}
			}
			if p.Store, err = openStore(ctx, *storeURL); err != nil {
				return err
			}
			var d verify.Digest
			if rest, ok := strings.CutPrefix(args[0], "s3://"); ok {
				bucket, prefix, _ := strings.Cut(rest, "/")
				if bucket == "" {
					return usagef("source %q: no bucket", args[0])
				}
				if p.Lister, err = dial.OpenLister(ctx); err != nil {
					return err
				}
				d, err = p.S3(ctx, bucket, prefix)
			} else {
				d, err = p.Dir(ctx, args[0])
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(out, d)
			return err
		}
	},
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
