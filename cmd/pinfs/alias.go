package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/admission"
	"github.com/pinfs/pinfs/store/gate"
)

var aliasCmd = &command{
	name:  "alias",
	short: "activate, roll back and inspect a gate: one linear history per alias",
	long: `An alias NAME is a gate: one record holding the active digest, its
generation, the tombstone watermark, the benchmark fence and the revocation
lists, chained to the record before it by digest. Every change is one
conditional write; mounts still accept digests only (pinfs resolve NAME).`,
	subs: []*command{aliasSetCmd, aliasRollbackCmd, aliasShowCmd, aliasLogCmd},
}

var aliasSetCmd = &command{
	name:  "set",
	args:  "NAME DIGEST --store STORE [--policy FILE] [--expect-generation N]",
	short: "activate an APPROVED snapshot: generation + 1",
	long: `Point gate NAME at DIGEST with one conditional write. It commits only if
DIGEST is approved under the trust policy (--policy FILE, or the policy
kept with the gate; a policy given here is kept with the gate from then
on), its manifest's tombstoneWatermark and benchmarkFence equal the gate's
current values, none of its members is revoked or fenced as benchmark
data, and the gate has not moved since it was read. A gate that does not
exist is created at the manifest's watermarks.

With --expect-generation N the activation never retries: if the gate is
not at generation N when it commits, it fails. Without it, a lost race is
checked again against the new gate record. If a fence moved first, the
activation fails with the reason and DIGEST stays APPROVED: build a new
manifest at the new watermark.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		return activateSetup(fs, out, false)
	},
}

var aliasRollbackCmd = &command{
	name:  "rollback",
	args:  "NAME DIGEST --store STORE [--policy FILE] [--expect-generation N]",
	short: "point a gate back at a digest it had: a higher generation",
	long: `Append a higher generation to gate NAME that points at DIGEST, a snapshot
the gate was at before. No snapshot is modified. Refused when DIGEST was
built at a tombstone watermark below the gate's, or holds a member that is
revoked or fenced as benchmark data: a rollback never resurrects revoked
data. Approvals are checked as for pinfs alias set.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		return activateSetup(fs, out, true)
	},
}

// activateSetup defines the flags of alias set and alias rollback.
func activateSetup(fs *pflag.FlagSet, out io.Writer, rollback bool) func(context.Context, []string) error {
	storeURL := storeFlag(fs)
	policyFile := policyFlag(fs)
	expect := fs.Int64("expect-generation", -1, "commit only if the gate is at generation `N` (0: it must not exist yet); never retries")
	reason := fs.String("reason", "", "`REASON` for the change, kept in the gate record")
	return func(ctx context.Context, args []string) error {
		if len(args) != 2 {
			return usagef("want NAME DIGEST, got %d arguments", len(args))
		}
		if err := gate.CheckName(args[0]); err != nil {
			return usageError{err}
		}
		d, err := parseSnapshot(args[1], *storeURL)
		if err != nil {
			return err
		}
		if fs.Changed("expect-generation") && *expect < 0 {
			return usagef("--expect-generation %d: want 0 or more", *expect)
		}
		p, err := loadPolicy(*policyFile)
		if err != nil {
			return err
		}
		st, err := openStore(ctx, *storeURL)
		if err != nil {
			return err
		}
		r, err := admission.Activate(ctx, st, admission.Activation{
			Gate: args[0], Digest: d, Expect: *expect, Policy: p, Rollback: rollback, Reason: *reason,
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s generation %d -> %s (tombstoneWatermark %d, benchmarkFence %d)\n",
			r.Name, r.Generation, r.Digest, r.TombstoneWatermark, r.BenchmarkFence)
		return nil
	}
}

var aliasShowCmd = &command{
	name:  "show",
	args:  "NAME --store STORE [--json]",
	short: "print a gate's current record",
	long: `Print the current record of gate NAME: generation, digest,
tombstoneWatermark, benchmarkFence, revocation and benchmark lists, the
policy kept with the gate, and the digest of the previous record.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		return gateView(fs, out, "print the record as JSON", func(ctx context.Context, g *gate.Gate) (any, []*gate.Record, error) {
			r, err := g.Head(ctx)
			return r, []*gate.Record{r}, err
		})
	},
}

var aliasLogCmd = &command{
	name:  "log",
	args:  "NAME --store STORE [--json]",
	short: "print a gate's history, newest first",
	long: `Print every record of gate NAME, newest first, after checking the hash
chain: each record's digest is the next one's prev, and generations step
down by one to 1. A gap, a fork or a changed record fails (exit 1).`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		return gateView(fs, out, "print the records as a JSON array", func(ctx context.Context, g *gate.Gate) (any, []*gate.Record, error) {
			hist, err := g.Log(ctx)
			return hist, hist, err
		})
	},
}

// gateView defines --store and --json for a command that reads gate
// records: read returns what --json prints and the records to print.
func gateView(fs *pflag.FlagSet, out io.Writer, jsonUsage string, read func(context.Context, *gate.Gate) (any, []*gate.Record, error)) func(context.Context, []string) error {
	storeURL := storeFlag(fs)
	asJSON := fs.Bool("json", false, jsonUsage)
	return func(ctx context.Context, args []string) error {
		g, err := gateArg(ctx, args, *storeURL)
		if err != nil {
			return err
		}
		v, rs, err := read(ctx, g)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, v)
		}
		for _, r := range rs {
			printRecord(out, r)
		}
		return nil
	}
}

var resolveCmd = &command{
	name:  "resolve",
	args:  "NAME --store STORE",
	short: "print the digest a gate points at (for schedulers)",
	long: `Print the digest gate NAME points at, and nothing else, so that a
scheduler can pass it to pinfs admit or pinfs mount. Exit 1 when the gate
does not exist or points at no snapshot yet.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		return func(ctx context.Context, args []string) error {
			g, err := gateArg(ctx, args, *storeURL)
			if err != nil {
				return err
			}
			r, err := g.Head(ctx)
			if err != nil {
				return err
			}
			if r.Digest == "" {
				return fmt.Errorf("gate %s has no active snapshot (generation %d)", r.Name, r.Generation)
			}
			fmt.Fprintln(out, r.Digest)
			return nil
		}
	},
}

// gateArg checks that args are one gate name and opens that gate.
func gateArg(ctx context.Context, args []string, storeURL string) (*gate.Gate, error) {
	if len(args) != 1 {
		return nil, usagef("want exactly one NAME, got %d arguments", len(args))
	}
	if err := gate.CheckName(args[0]); err != nil {
		return nil, usageError{err}
	}
	st, err := openStore(ctx, storeURL)
	if err != nil {
		return nil, err
	}
	return gate.Open(st, args[0])
}

// printRecord prints one gate record in two lines.
func printRecord(w io.Writer, r *gate.Record) {
	d := r.Digest
	if d == "" {
		d = "(none)"
	}
	fmt.Fprintf(w, "%s generation %d %s %s  tombstoneWatermark=%d benchmarkFence=%d revocations=%d benchmarks=%d\n",
		r.Name, r.Generation, r.Op, d, r.TombstoneWatermark, r.BenchmarkFence, len(r.Revocations), len(r.Benchmarks))
	fmt.Fprintf(w, "  record %s prev %s at %s by %s", r.RecordDigest(), orNone(string(r.Prev)), r.Time, orNone(r.By))
	if r.Reason != "" {
		fmt.Fprintf(w, " reason %q", r.Reason)
	}
	fmt.Fprintln(w)
}

// orNone is s, or "-" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
