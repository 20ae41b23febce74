package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/admission"
	"github.com/pinfs/pinfs/cmd/internal/mount"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/store/gate"
)

var admitCmd = &command{
	name:  "admit",
	args:  "NAME|DIGEST --purpose P --store STORE [--run-record URL] [--run-id R] [--policy FILE]",
	short: "grant a run a permit for one snapshot: resolve once, check, bind",
	long: `Resolve gate NAME once (or take DIGEST), check that P is the manifest's
purpose, that the snapshot is approved under the trust policy (--policy
FILE, or the gate's) and, through a gate, that it was built at the gate's
current tombstone watermark and benchmark fence and holds no revoked or
benchmark member; then write a permit into run R's binding in the run
record: run id, digest, gate and generation, fences, policy, approvals,
time. Prints the run id and the digest. The run record is --run-record,
by default <cache-dir>/runs.jsonl, the same default as pinfs mount's.

Mount with pinfs mount DIGEST MNT --run-id R --require-permit. A run keeps
its digest: admitting run R again returns the permit it holds, whatever the
gate says now, so that a resumed job gets the same digest; but only a
permit granted for the same NAME or DIGEST and purpose, under the policy
given now (--policy FILE; without it, for NAME, the one the gate's current
head keeps; DIGEST needs --policy), and only once it checks out against
the store (approved under that policy; through a gate, the gate's history
holds its generation at that digest). Otherwise admit refuses with exit
status 1 and writes nothing.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		purpose := fs.String("purpose", "", "`P`, what the run reads the snapshot for; must equal the manifest's purpose")
		record := fs.String("run-record", "", recordHelp)
		cacheDir := fs.String("cache-dir", defaultCacheDir(), "`DIR` of this host's mounts: its runs.jsonl is the default run record, its spool their bindings")
		runID := fs.String("run-id", "", "run id `R` (default: generated)")
		policyFile := policyFlag(fs)
		return func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usagef("want exactly one NAME or DIGEST, got %d arguments", len(args))
			}
			if *purpose == "" {
				return usagef("--purpose is required")
			}
			url, err := recordURL(*record, *cacheDir)
			if err != nil {
				return err
			}
			target := args[0]
			if _, err := parseDigest(target); err != nil && gate.CheckName(target) != nil {
				return usageError{withHint(fmt.Errorf("%q is neither a gate name nor a sha256:<64 hex> digest", target), meantDigest(target))}
			}
			if *record == "" {
				// The mount that uses this default checks the cache dir
				// the same way first.
				if err := mount.PrepareCacheDir(*cacheDir); err != nil {
					return err
				}
			}
			p, err := loadPolicy(*policyFile)
			if err != nil {
				return err
			}
			st, err := openStore(ctx, *storeURL)
			if err != nil {
				return err
			}
			v, created, err := admission.Admit(ctx, st, admission.Request{
				Target: target, Purpose: *purpose, Policy: p,
				Record: runrecord.Options{URL: url, RunID: *runID, SpoolDir: spoolOf(*cacheDir)},
			})
			if err != nil {
				return err
			}
			held := v.Permit()
			if !created {
				fmt.Fprintf(os.Stderr, "pinfs admit: run %s was admitted at %s (gate %q generation %d); it keeps that permit and digest\n",
					held.RunID, held.Time.Format(time.RFC3339), held.Gate, held.Generation)
			}
			fmt.Fprintf(out, "%s %s\n", held.RunID, held.Digest)
			return nil
		}
	},
}
