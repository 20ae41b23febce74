// Package derive implements `pinfs derive`: it runs a versioned transform
// over snapshots mounted read-only by digest, pins what the transform
// wrote, and records the derivation (verify/derive) in the store, keyed so
// that the same derivation is not run twice and can be checked.
//
// # Running
//
// Runner.Run mounts each input in-process (mount.Run) under a fresh
// scratch dir, runs the command with PINFS_INPUT_<NAME>, PINFS_OUTPUT,
// PINFS_PARAM_<KEY>, PINFS_TRANSFORM and PINFS_DERIVATION_KEY set and
// without the variables that may carry storage credentials (Credential:
// every AWS_*) unless Runner.PassEnv names them, and pins <work>/output
// with the inputs as parents. The output dir always has
// the base name "output", so the same bytes pin to the same digest on any
// machine and in any scratch dir.
//
// # Cache
//
// Derive skips a derivation whose key has a record and whose recorded
// output manifest is in the store. With force, or when that manifest is
// gone, it reruns and compares: other bytes are a DriftError, and the
// record stays as it was.
//
// # Check
//
// Check reruns a recorded derivation and compares its output with the
// recorded one. Same digest proves that this transform version is
// deterministic on these inputs, not that it is correct.
//
// A record in the store is a claim anyone who can write the store can
// make (its key is self-certifying), so a command read from the store is
// never run: ParseTarget takes a record file from the caller, or a key or
// output digest with the caller's command, and Target.Records keeps only
// the store's records with that command.
package derive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/derivations"
	"github.com/pinfs/pinfs/verify"
	record "github.com/pinfs/pinfs/verify/derive"
)

// Outcome says what Derive did.
type Outcome int

const (
	// Ran: the key had no record; the derivation ran and was recorded.
	Ran Outcome = iota
	// Cached: the key's recorded output is in the store; nothing ran.
	Cached
	// Reproduced: rerun (force, or the recorded output was gone from the
	// store) and gave the recorded output.
	Reproduced
)

// Result is what Derive returns: the derivation's record (the stored one)
// and what was done.
type Result struct {
	Record  *record.Record
	Outcome Outcome
}

// Derive derives r (a record from record.New: Output and Time unset)
// unless the store has it already. A key with a record whose output
// manifest is in the store is Cached; with force, or when that manifest
// is gone, the derivation reruns, and an output other than the recorded
// one is a *DriftError. A key without a record runs and is saved with its
// output and now as its time; should another run have recorded the key
// meanwhile with another output, that is a *DriftError too.
func Derive(ctx context.Context, rn *Runner, r *record.Record, force bool, now time.Time) (*Result, error) {
	old, err := derivations.ByKey(ctx, rn.Store, r.Key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		old = nil
	case err != nil:
		return nil, err
	}
	if old != nil && !force {
		ok, err := HasOutput(ctx, rn.Store, old.Output)
		if err != nil {
			return nil, err
		}
		if ok {
			return &Result{Record: old, Outcome: Cached}, nil
		}
		rn.Log.Warn("the recorded output is gone from the store: running the derivation again", "key", r.Key, "output", old.Output)
	}
	out, err := rn.Run(ctx, r)
	if err != nil {
		return nil, err
	}
	if old != nil {
		if err := Compare(ctx, rn.Store, old, out); err != nil {
			return nil, err
		}
		return &Result{Record: old, Outcome: Reproduced}, nil
	}
	done := *r
	done.Output, done.Time = out, now.UTC().Format(record.TimeFormat)
	saved, err := derivations.Save(ctx, rn.Store, &done)
	if err != nil {
		return nil, fmt.Errorf("record of derivation %s: %w", r.Key, err)
	}
	if err := Compare(ctx, rn.Store, saved, out); err != nil {
		return nil, err
	}
	return &Result{Record: saved, Outcome: Ran}, nil
}

// Check reruns the recorded derivation r into a scratch dir, pins the
// result and compares it with r.Output: nil when they are the same, a
// *DriftError when not. It records nothing.
func Check(ctx context.Context, rn *Runner, r *record.Record) error {
	out, err := rn.Run(ctx, r)
	if err != nil {
		return err
	}
	return Compare(ctx, rn.Store, r, out)
}

// Compare returns nil when out is r's recorded output, and otherwise a
// *DriftError that lists the members that differ (or says that the
// recorded output is not in the store).
func Compare(ctx context.Context, st store.Blobs, r *record.Record, out verify.Digest) error {
	if out == r.Output {
		return nil
	}
	e := &DriftError{Transform: r.Transform, Recorded: r.Output, Rerun: out}
	rerun, err := verify.Load(ctx, st, out)
	if err != nil {
		return fmt.Errorf("rerun output: %w", err)
	}
	recorded, err := verify.Load(ctx, st, r.Output)
	switch {
	case errors.Is(err, store.ErrNotFound):
		e.Missing = "recorded output not in the store"
	case err != nil:
		e.Missing = "recorded output unreadable: " + err.Error()
	default:
		e = Drift(r.Transform, recorded, rerun)
	}
	return e
}

// HasOutput reports whether the manifest of output d is in st. A manifest
// that is there but does not match d is an error.
func HasOutput(ctx context.Context, st store.Blobs, d verify.Digest) (bool, error) {
	b, err := st.Get(ctx, verify.ManifestKey(d))
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("output %s: %w", d, err)
	}
	if _, err := verify.ParseManifest(d, b); err != nil {
		return false, fmt.Errorf("output %s: %w", d, err)
	}
	return true, nil
}
