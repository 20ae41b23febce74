package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/pin"
	"github.com/pinfs/pinfs/store/dial"
)

var pinCmd = &command{
	name:  "pin",
	args:  "SOURCE --store STORE [flags] | --plan PLAN (--shard I | --merge) --store STORE",
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
tag alone (registry/harvest:v1) is refused with exit 2, since a tag can
move under the manifest, and so is a version (harvest@v1): that is what
pinfs derive --transform takes, whose --check reruns the derivation.

SOURCE DIR copies the regular files under DIR into the store's
content-addressed area and pins them. Symbolic links and special files are
refused. A file replaced (by a link, a FIFO or another file) or changed
while it is pinned fails the pin and is named. The store hashes what it
writes and never reuses a blob it has not re-hashed. Paths with control
characters are refused.

Pinning the same source versions with the same flags gives the same digest.

Re-pins read only what changed. An S3 object version never changes, so
once a version's BLAKE3 digest and Bao outboard are known they are taken
from the store instead of being read again: from the members of every
--parent manifest, and by default from the store's digest cache of the
source (versions/ in the store: content-addressed segments, a few
requests whatever the number of members). A reused member's outboard must
be in the store and hash up to its digest; otherwise the member is read
and its outboard rewritten. The pin prints on stderr how many members were
reused and read and the bytes it read. --rehash reads everything (and
reports cached digests that differ); pinfs verify --deep re-reads every
member, so the shortcut can always be audited.

A first pin of a huge prefix spreads over machines in three phases:

  pinfs pin s3://B/P --store S --plan plan.json --shards N [manifest flags]
      list once, split the members into N shards of balanced bytes, write
      the plan to plan.json and to the store; print the plan's digest
  pinfs pin --plan plan.json|sha256:PLAN --shard I --store S
      hash shard I (0 <= I < N) and store its partial table; idempotent,
      and a rerun after a crash reuses what the crashed run checkpointed
  pinfs pin --plan plan.json|sha256:PLAN --merge --store S
      check that every shard is stored and covers exactly the plan, list
      the prefix again, write the manifest and print its digest: the
      digest a single pin of the same listing gives

docs/pin-at-scale.md has the details and a Kubernetes Indexed Job.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		parents := fs.StringArray("parent", nil, "`DIGEST` of an earlier manifest this one derives from (repeatable); its members' known versions are reused")
		purpose := fs.String("purpose", "", "`PURPOSE` of the snapshot, e.g. support-model-training-v3")
		split := fs.String("split", "dir", "split `RULE`: dir (first path component if train, val, validation or test), dir:NAME,NAME..., or none")
		transform := fs.String("transform", "", "`NAME@DIGEST` of the code or image that produced the members: NAME@sha256:<64 hex> or NAME@<40 or 64 hex commit>, never a tag alone")
		recordSchema := fs.String("record-schema", "", "`DIGEST` of the record schema")
		selection := fs.String("selection-policy", "", "`DIGEST` of the selection policy")
		tombstone := fs.Int64("tombstone-watermark", 0, "deletion/revocation watermark `N` the sources were read at")
		fence := fs.Int64("benchmark-fence", 0, "benchmark fence `N` the selection respected")
		jobs := fs.Int("jobs", 8, "`N` objects read and hashed in parallel")
		rehash := fs.Bool("rehash", false, "read and hash every object, even versions the digest cache or a --parent knows (audits the cache)")
		planFile := fs.String("plan", "", "sharded pin: the `PLAN` file to write (with --shards) or to read (with --shard, --merge; also sha256:<hex> of a plan in the store)")
		shards := fs.Int("shards", 0, "sharded pin, phase 1: list SOURCE once and write a plan of `N` shards of balanced bytes to --plan")
		shard := fs.Int("shard", -1, "sharded pin, phase 2: hash shard `I` (0 <= I < N) of --plan and store its partial table; idempotent")
		fs.Bool("merge", false, "sharded pin, phase 3: check every shard of --plan is stored and write the manifest")
		manifestFlags := []string{"parent", "purpose", "split", "transform", "record-schema", "selection-policy", "tombstone-watermark", "benchmark-fence"}
		return func(ctx context.Context, args []string) error {
			phase, err := pinPhase(fs, args, *planFile, manifestFlags)
			if err != nil {
				return err
			}
			p := &pin.Pinner{Options: pin.Options{Jobs: *jobs, Rehash: *rehash}}
			if isTerminal(os.Stderr) {
				p.Progress = &pin.Progress{W: os.Stderr}
			}
			if phase == phaseShard || phase == phaseMerge {
				return pinFromPlan(ctx, p, *storeURL, *planFile, phase, *shard, out)
			}
			if err := pin.CheckTransform(*transform); err != nil {
				return usagef("%v; %s", err, pin.TransformAlternative(*transform))
			}
			p.Purpose, p.Transform, p.RecordSchema, p.SelectionPolicy = *purpose, *transform, *recordSchema, *selection
			if fs.Changed("tombstone-watermark") {
				p.TombstoneWatermark = tombstone
			}
			if fs.Changed("benchmark-fence") {
				p.BenchmarkFence = fence
			}
			if p.Split, err = pin.ParseSplitRule(*split); err != nil {
				return usageError{err}
			}
			for _, s := range *parents {
				d, err := parseSnapshot(s, *storeURL)
				if err != nil {
					return err
				}
				p.Parents = append(p.Parents, d)
			}
			rest, isS3 := strings.CutPrefix(args[0], "s3://")
			bucket, prefix, _ := strings.Cut(rest, "/")
			switch {
			case isS3 && bucket == "":
				return usagef("source %q: no bucket", args[0])
			case !isS3 && phase == phasePlan:
				return usagef("--shards: source %q is not s3://BUCKET/PREFIX; only S3 pins are sharded", args[0])
			}
			if p.Store, err = openStore(ctx, *storeURL); err != nil {
				return err
			}
			if !isS3 {
				d, err := p.Dir(ctx, args[0])
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(out, d)
				return err
			}
			if p.Lister, err = dial.OpenLister(ctx); err != nil {
				return err
			}
			if phase == phasePlan {
				return writePlan(ctx, p, bucket, prefix, *shards, *planFile, out)
			}
			d, err := p.S3(ctx, bucket, prefix)
			if err != nil {
				return err
			}
			reportStats(p.Stats(), "")
			_, err = fmt.Fprintln(out, d)
			return err
		}
	},
}

// pinPhase is what one pinfs pin does: a whole pin, or one phase of a
// sharded pin.
type pinPhaseKind int

const (
	phaseWhole pinPhaseKind = iota
	phasePlan
	phaseShard
	phaseMerge
)

// pinPhase checks that the flags and arguments name exactly one phase.
func pinPhase(fs *pflag.FlagSet, args []string, plan string, manifestFlags []string) (pinPhaseKind, error) {
	shards, shard, merge := fs.Changed("shards"), fs.Changed("shard"), fs.Changed("merge")
	n := 0
	for _, set := range []bool{shards, shard, merge} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return 0, usagef("--shards, --shard and --merge are three phases; give one of them")
	case n == 1 && plan == "":
		return 0, usagef("--shards, --shard and --merge need --plan FILE")
	case n == 0 && fs.Changed("plan"):
		return 0, usagef("--plan needs --shards N (write a plan), --shard I (hash a shard) or --merge")
	case shards:
		if len(args) != 1 {
			return 0, usagef("--shards: want exactly one SOURCE s3://BUCKET/PREFIX, got %d arguments", len(args))
		}
		if v, _ := fs.GetInt("shards"); v < 1 || v > pin.MaxShards {
			return 0, usagef("--shards %d: want 1 to %d", v, pin.MaxShards)
		}
		return phasePlan, nil
	case shard || merge:
		if len(args) != 0 {
			return 0, usagef("--shard and --merge take the SOURCE from --plan; got %d arguments", len(args))
		}
		for _, f := range manifestFlags {
			if fs.Changed(f) {
				return 0, usagef("--%s: manifest flags are fixed when the plan is written (with --shards)", f)
			}
		}
		if shard {
			return phaseShard, nil
		}
		return phaseMerge, nil
	}
	if len(args) != 1 {
		return 0, usagef("want exactly one SOURCE, got %d arguments", len(args))
	}
	return phaseWhole, nil
}

// writePlan lists bucket/prefix once and writes a plan of n shards to file
// and to the store; it prints the plan's digest.
func writePlan(ctx context.Context, p *pin.Pinner, bucket, prefix string, n int, file string, out io.Writer) error {
	pl, b, d, err := p.Plan(ctx, bucket, prefix, n)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(file, b); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "pinfs pin: plan %s: %s; written to %s\n", d, pl.Summary(), file)
	_, err = fmt.Fprintln(out, d)
	return err
}

// pinFromPlan runs phase 2 (one shard) or phase 3 (merge) of a sharded pin.
func pinFromPlan(ctx context.Context, p *pin.Pinner, storeURL, planArg string, phase pinPhaseKind, i int, out io.Writer) error {
	var err error
	if p.Store, err = openStore(ctx, storeURL); err != nil {
		return err
	}
	pl, d, err := pin.LoadPlan(ctx, p.Store, planArg)
	if err != nil {
		return err
	}
	if p.Options, err = pl.Options(p.Options); err != nil {
		return err
	}
	if phase == phaseShard {
		if i < 0 || i >= pl.Len() {
			return usagef("--shard %d: plan %s has shards 0 to %d", i, d, pl.Len()-1)
		}
		if err := p.Shard(ctx, pl, d, i); err != nil {
			return err
		}
		reportStats(p.Stats(), fmt.Sprintf("shard %d of %d: ", i, pl.Len()))
		return nil
	}
	if p.Lister, err = dial.OpenLister(ctx); err != nil {
		return err
	}
	md, err := p.Merge(ctx, pl, d)
	if err != nil {
		return err
	}
	reportStats(p.Stats(), "merge: ")
	_, err = fmt.Fprintln(out, md)
	return err
}

// writeFileAtomic writes b to path through a temporary file renamed over
// it, so a reader never sees half a plan.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// reportStats prints the summary line of an S3 pin, shard or merge, and
// what went wrong with the digest cache, to stderr.
func reportStats(s pin.Stats, what string) {
	fmt.Fprintf(os.Stderr, "pinfs pin: %s%s\n", what, s)
	if s.Disagreed > 0 {
		fmt.Fprintf(os.Stderr, "pinfs pin: warning: the digest cache held %d wrong digests; the bytes read replace them\n", s.Disagreed)
	}
	if s.CacheError != "" {
		fmt.Fprintf(os.Stderr, "pinfs pin: warning: digest cache: %s\n", s.CacheError)
	}
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
