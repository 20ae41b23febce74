package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/admission"
	"github.com/pinfs/pinfs/cmd/internal/mountstatus"
	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/verify"
)

var statusCmd = &command{
	name:  "status",
	args:  "DIGEST --store STORE [--policy FILE] [--json] | MOUNTPOINT [--json] [--timeout DURATION] [--wait DURATION]",
	short: "a snapshot's admission state, or a running mount's status (a readiness probe)",
	long: `Print where snapshot DIGEST stands: BUILDING (pinned), VALIDATED (a
passing validation report), APPROVED (approvals that satisfy a trust
policy) or ACTIVE (a gate has pointed at it); its passing reports; every
stored signature with who signed, in which role, when, and under which
policies it is valid; whether the snapshot is approved under --policy FILE
and under the policy kept by each gate that points at it; and the gates
and generations that point at it.

With MOUNTPOINT (any argument that is not a full digest; a directory
named like one is ./sha256:...), report on the pinfs mount there: its
digest, run id, pid and uptime; members opened, bytes served, cache hits
per tier and network fetches; integrity events so far; the store's last
error (store_error: kind access, unreachable, missing or other, message,
time) until a fetch succeeds; the pinfs version. Exit 0 when the mount
serves, 1 when it does not (not a pinfs mount, its daemon is gone, it
does not answer within --timeout, the path does not exist, or the store
refused its last fetch for access: reads of bytes not cached fail until
a fetch succeeds), with the reason on stderr; --json prints the status
in every case. This is the readiness probe of a sidecar or a systemd
unit; --wait waits out a refusal too. --store and --policy are ignored,
but a MOUNTPOINT that does not exist and reads as a snapshot name (a bare
digest; with --store, an alias) is told what to run instead.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		policyFile := policyFlag(fs)
		asJSON := fs.Bool("json", false, "print the status as JSON")
		timeout := fs.Duration("timeout", 5*time.Second, "MOUNTPOINT: how long (`DURATION`) one query waits for the pinfs daemon")
		wait := fs.Duration("wait", 0, "MOUNTPOINT: ask again until the mount serves or `DURATION` has passed (0: ask once)")
		return func(ctx context.Context, args []string) error {
			if len(args) == 1 && mountpointArg(args[0]) {
				err := mountStatus(ctx, out, args[0], *asJSON, *timeout, *wait)
				if errors.Is(err, mountstatus.ErrNotExist) {
					err = withHint(err, snapshotNameHint(args[0], *storeURL, fs.Changed("store")))
				}
				return err
			}
			hint := namesPath(args)
			d, st, err := snapshotArg(ctx, args, *storeURL, "exactly one DIGEST or MOUNTPOINT", 0)
			if err != nil {
				return withHint(err, hint)
			}
			p, err := loadPolicy(*policyFile)
			if err != nil {
				return err
			}
			s, err := admission.StatusOf(ctx, st, d, p)
			if err != nil {
				return withHint(err, hint)
			}
			if hint != "" {
				logFrom(ctx).Warn(hint)
			}
			if *asJSON {
				return printJSON(out, s)
			}
			printStatus(out, s)
			return nil
		}
	},
}

// mountpointArg reports whether the argument of pinfs status names a
// mountpoint rather than a snapshot: it is not a full digest, and if it
// begins with sha256: a path of that name exists (otherwise it is a
// mistyped digest: a usage error, as before).
func mountpointArg(arg string) bool {
	if _, err := verify.ParseDigest(arg); err == nil || arg == "" {
		return false
	}
	if strings.HasPrefix(arg, "sha256:") {
		_, err := os.Lstat(arg)
		return !errors.Is(err, iofs.ErrNotExist)
	}
	return true
}

// snapshotNameHint is the hint for a MOUNTPOINT arg of pinfs status that
// does not exist but reads as a snapshot name: a bare digest (did you
// mean sha256:…?) or, with --store given (only a snapshot needs one), an
// alias (pinfs resolve). A missing mountpoint otherwise gets none.
func snapshotNameHint(arg, storeURL string, storeGiven bool) string {
	if h := meantDigest(arg); h != "" {
		return h
	}
	if storeGiven && gate.CheckName(arg) == nil {
		return snapshotHint(arg, storeURL)
	}
	return ""
}

// namesPath returns, when the one argument of pinfs status is a full
// digest that also names a path here (a mountpoint called after its
// snapshot, with the shell in its parent), the hint that says how to ask
// for that mount instead; otherwise "".
func namesPath(args []string) string {
	if len(args) != 1 || mountpointArg(args[0]) {
		return ""
	}
	if _, err := os.Lstat(args[0]); err != nil {
		return ""
	}
	return fmt.Sprintf("%s is read as a snapshot digest; for the mount at the directory of that name run pinfs status ./%s", args[0], args[0])
}

// statusRetry is how long pinfs status --wait pauses between queries.
const statusRetry = 250 * time.Millisecond

// mountStatus prints the status of the pinfs mount at dir and returns
// the reason it does not serve, if it does not.
func mountStatus(ctx context.Context, out io.Writer, dir string, asJSON bool, timeout, wait time.Duration) error {
	if timeout <= 0 {
		return usagef("--timeout %v: want a positive duration such as 5s", timeout)
	}
	if wait < 0 {
		return usagef("--wait %v: want a duration such as 2m, or 0 to ask once", wait)
	}
	st, err := waitServing(ctx, dir, timeout, wait)
	if asJSON {
		if perr := printJSON(out, st); perr != nil {
			return perr
		}
	} else if err == nil {
		err = st.WriteText(out)
	}
	return err
}

// waitServing queries the mount at dir, each query bounded by timeout,
// until it serves or wait has passed (a last query may start just before
// and take up to timeout more), and returns the last answer.
func waitServing(ctx context.Context, dir string, timeout, wait time.Duration) (*mountstatus.Status, error) {
	end := time.Now().Add(wait)
	for {
		qctx, cancel := context.WithTimeout(ctx, timeout)
		st, err := mountstatus.Query(qctx, dir)
		cancel()
		left := time.Until(end)
		if err == nil || ctx.Err() != nil || left <= 0 {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, err
		case <-time.After(min(statusRetry, left)):
		}
	}
}

func printStatus(w io.Writer, s *admission.Status) {
	fmt.Fprintf(w, "%s %s\n  purpose %q, %d members, %d bytes, tombstoneWatermark %d, benchmarkFence %d\n",
		s.Digest, s.State, s.Purpose, s.Members, s.Bytes, s.TombstoneWatermark, s.BenchmarkFence)
	for _, r := range s.Reports {
		fmt.Fprintf(w, "  validated %s report %s deep=%t gate=%s\n", r.ValidatedAt, r.Digest, r.Deep, orNone(r.Gate))
	}
	for _, sig := range s.Signatures {
		if sig.KeyID == "" {
			fmt.Fprintf(w, "  signature %s: by no key of the policies checked\n", sig.Envelope)
			continue
		}
		valid := make([]string, len(sig.Valid))
		for i, v := range sig.Valid {
			valid[i] = string(v)
		}
		fmt.Fprintf(w, "  signed by %s (%s) as %s at %s, report %s, valid under %s\n",
			sig.KeyID, sig.Approver, sig.Role, sig.Time, sig.Report, strings.Join(valid, ", "))
	}
	for _, p := range s.Policies {
		if p.Approved {
			fmt.Fprintf(w, "  approved under policy %s (%s)\n", p.Policy, p.From)
		} else {
			fmt.Fprintf(w, "  NOT approved under policy %s (%s): %s\n", p.Policy, p.From, p.Reason)
		}
	}
	for _, a := range s.Aliases {
		gens := make([]string, len(a.Generations))
		for i, g := range a.Generations {
			gens[i] = fmt.Sprint(g)
		}
		cur := ""
		if a.Current {
			cur = " (current)"
		}
		fmt.Fprintf(w, "  gate %s generations %s%s\n", a.Gate, strings.Join(gens, ", "), cur)
	}
}
