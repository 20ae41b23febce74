package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/admission"
	"github.com/pinfs/pinfs/store/gate"
)

var fenceCmd = &command{
	name:  "fence",
	args:  "NAME (--tombstone N [--revoke FILE] | --benchmark N [--revoke FILE]) --store STORE",
	short: "advance a gate's tombstone watermark or benchmark fence",
	long: `Advance gate NAME's tombstone watermark (--tombstone N) or benchmark
fence (--benchmark N) with one conditional write. Fences only move
forward: N at or below the current value is refused. A lost race is
retried against the new record, since an advance does not depend on it.

--revoke FILE lists member ids or blake3:<hex> digests (one per line, #
comments; a line starting with blake3: in any case must be blake3: and
64 lower-case hex digits, else the file is refused, exit 2) revoked at N, or fenced as benchmark data at N; the list is
stored content-addressed and named by the gate record. From then on no
snapshot holding such a member is activated or admitted through NAME, and
a snapshot built at an older watermark is not activated: build a new
manifest at the new watermark. Runs already admitted keep their digest.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		tombstone := fs.Int64("tombstone", 0, "new tombstone watermark `N`")
		benchmark := fs.Int64("benchmark", 0, "new benchmark fence `N`")
		revoke := fs.String("revoke", "", "`FILE` of member ids or blake3 digests revoked (or fenced as benchmark data) at N")
		reason := fs.String("reason", "", "`REASON` for the change, kept in the gate record")
		return func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usagef("want exactly one NAME, got %d arguments", len(args))
			}
			if err := gate.CheckName(args[0]); err != nil {
				return usageError{err}
			}
			if fs.Changed("tombstone") == fs.Changed("benchmark") {
				return usagef("give exactly one of --tombstone N and --benchmark N")
			}
			if *tombstone < 0 || *benchmark < 0 || (*tombstone == 0 && *benchmark == 0) {
				return usagef("a fence is a number above 0")
			}
			c := admission.FenceChange{Gate: args[0], Tombstone: *tombstone, Benchmark: *benchmark, Reason: *reason}
			if *revoke != "" {
				var err error
				if c.Entries, err = admission.ReadList(*revoke); err != nil {
					return usageError{fmt.Errorf("--revoke: %w", err)}
				}
			}
			st, err := openStore(ctx, *storeURL)
			if err != nil {
				return err
			}
			r, err := admission.Fence(ctx, st, c)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s generation %d: tombstoneWatermark %d, benchmarkFence %d\n",
				r.Name, r.Generation, r.TombstoneWatermark, r.BenchmarkFence)
			return nil
		}
	},
}
