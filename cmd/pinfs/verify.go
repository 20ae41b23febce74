package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/check"
	"github.com/pinfs/pinfs/verify"
)

var verifyCmd = &command{
	name:  "verify",
	args:  "DIGEST --store STORE [--cache-dir DIR] [--deep] [--no-head] [--json]",
	short: "check a manifest, its member table and every pinned version",
	long: `Verify a snapshot in two levels.

Always: fetch the manifest and recompute its digest; fetch the member table
and check its digest, count and byte total; check every member (unique
ids, safe and unique paths, no path that is both a file and a directory, a
real version id for every S3 member); and check that every pinned version
still exists with its pinned size (a HEAD with the version id: the
preflight that tells a scheduler whether a run can read everything).

--deep also re-reads every member at its version and compares its BLAKE3
digest and Bao outboard with the pinned ones.

--policy FILE also requires approvals that satisfy the trust policy:
enough distinct approver keys that signed this manifest together with a
passing validation report of it (docs/admission.md). A manifest or report
changed after signing fails the check.

--no-head reads the manifest and member table through the cache dir's
verified metadata, as pinfs mount reads them: a snapshot a mount or an
earlier check verified there is checked from its copy and index, without
fetching or parsing its table again. Without --no-head (and with --deep)
verify is the check of the store's own copies: it reads both from the
store, whose members it asks about one by one anyway.

The report counts members, bytes and problems by kind and names each
failing member and why. Exit 0 when everything holds, 1 when a check fails.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		deep := fs.Bool("deep", false, "also re-read every member and compare digests")
		noHead := fs.Bool("no-head", false, "check manifest and member table only, without a HEAD per member, from the --cache-dir's verified copies when it holds them")
		asJSON := fs.Bool("json", false, "print the report as JSON")
		jobs := fs.Int("jobs", 16, "`N` members checked in parallel")
		policyFile := policyFlag(fs)
		meta := defineMetaFlags(fs)
		return func(ctx context.Context, args []string) error {
			if contentOnly(*storeURL) && (!*noHead || *deep) {
				return usagef("--store %s reads content through a cache tier, not the store's objects: pass --no-head (the manifest and member table, verified), or verify against the store itself", *storeURL)
			}
			d, st, err := snapshotArg(ctx, args, *storeURL, "exactly one DIGEST", 0)
			if err != nil {
				return err
			}
			p, err := loadPolicy(*policyFile)
			if err != nil {
				return err
			}
			var g verify.Getter // nil: the store's own copies
			if *noHead && !*deep {
				if g, err = meta.reader(ctx, st); err != nil {
					return err
				}
			}
			r, err := check.Run(ctx, st, d, check.Options{Deep: *deep, NoHead: *noHead, Jobs: *jobs, Meta: g})
			if err != nil {
				return err
			}
			v := verified{Report: r}
			if p != nil && r.Error == "" {
				v.Approval = checkApproval(ctx, st, d, p)
			}
			if *asJSON {
				err = printJSON(out, v)
			} else {
				printReport(out, r, v.Approval)
			}
			if err == nil && (!r.OK || v.Approval != nil && !v.Approval.Approved) {
				err = errCheckFailed
			}
			return err
		}
	},
}

func printReport(w io.Writer, r *check.Report, a *approval) {
	fmt.Fprintf(w, "snapshot %s\n", r.Snapshot)
	if r.Error != "" {
		fmt.Fprintf(w, "FAIL manifest: %s\nverify: FAILED\n", r.Error)
		return
	}
	level := "versions checked"
	if r.Deep {
		level = "members re-read (deep)"
	}
	fmt.Fprintf(w, "members %d, bytes %d, %s %d\n", r.Members, r.Bytes, level, r.Checked)
	for _, k := range check.Kinds {
		fmt.Fprintf(w, "  %-16s %d\n", k, r.Counts[k])
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "FAIL %s\n", p)
	}
	switch {
	case a != nil && a.Approved:
		fmt.Fprintf(w, "approved under policy %s by %s\n", a.Policy, strings.Join(a.Approvers, ", "))
	case a != nil:
		fmt.Fprintf(w, "FAIL approvals: %s\n", a.Reason)
	}
	switch {
	case !r.OK:
		fmt.Fprintf(w, "verify: FAILED (%d problems)\n", len(r.Problems))
	case a != nil && !a.Approved:
		fmt.Fprintf(w, "verify: FAILED (not approved under policy %s)\n", a.Policy)
	default:
		fmt.Fprintln(w, "verify: OK")
	}
}

// verified is what pinfs verify --json prints: the check report and, with
// --policy, whether the approvals satisfy the policy.
type verified struct {
	*check.Report
	Approval *approval `json:"approval,omitempty"`
}
