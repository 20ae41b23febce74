package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/admission"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

var approveCmd = &command{
	name:  "approve",
	args:  "DIGEST --key KEY --store STORE [--role ROLE] [--policy FILE] [--alias NAME] [--cache-dir DIR] [--report REPORT]",
	short: "validate a snapshot and sign it with its validation report: APPROVED",
	long: `Validate the snapshot DIGEST, as pinfs validate does with the same
--policy, --alias, --deep and --jobs, and, when it passes, sign DIGEST
together with the digest of that validation report with the ed25519 key
KEY (from pinfs key generate). The report and its VALIDATED marker are
stored as pinfs validate stores them; the signature is stored beside the
manifest: a DSSE envelope carrying an in-toto Statement whose subjects are
the two digests and whose predicate is the approval and its role. The
manifest is never rewritten. A snapshot that fails validation is refused
(exit 1), each hard failure named on stderr, and nothing is signed.

Approve signs only a report you produced: a report found in the store is
a claim of whoever wrote the store, so approve never picks one. With
--report REPORT it validates nothing and signs REPORT, a report you
produced with pinfs validate: it must be a passing report of DIGEST and,
with --policy or --alias, vouch for its members' digests under that
policy (it hashed every member, or inherited only from parents approved
under it).

An approval counts under a trust policy only when its report vouches under
that policy: so approve a snapshot that has parents with the --policy (or
--alias) it will be used under. A report that inherited digests on the
store's word (validated without a policy) counts under no policy; approve
says so on stderr.

Whether the approvals are enough is decided by a trust policy when the
snapshot is used: pinfs verify --policy, pinfs mount --policy, pinfs alias
set, pinfs admit. The last line is "  envelope sha256:<envelope digest>".`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		keyFile := fs.String("key", "", "`KEY`, the private key file (PREFIX.key from pinfs key generate)")
		role := fs.String("role", "approver", "the `ROLE` the signer approves in, e.g. data-owner")
		report := fs.String("report", "", "sign validation report `REPORT` (its digest), a report you produced with pinfs validate, instead of validating")
		vf := validationFlags(fs)
		return func(ctx context.Context, args []string) error {
			if err := vf.check(); err != nil {
				return err
			}
			d, st, err := snapshotArg(ctx, args, *storeURL, "exactly one DIGEST", 0)
			if err != nil {
				return err
			}
			if *keyFile == "" {
				return usagef("--key is required")
			}
			var rd verify.Digest
			if *report != "" {
				if rd, err = parseDigest(*report); err != nil {
					return err
				}
			}
			s, err := sign.LoadSigner(*keyFile)
			if err != nil {
				return err
			}
			f, o, err := vf.inForce(ctx, st, "approve")
			if err != nil {
				return err
			}
			a := sign.Approval{Role: *role, Approver: whoami()}
			var env verify.Digest
			var r *admission.Report
			if rd != "" {
				env, r, err = admission.Approve(ctx, st, d, s, rd, o.Policy, a)
			} else {
				r, rd, env, err = admission.ValidateAndApprove(ctx, st, d, f, o, s, a)
				if r != nil {
					printFailures(os.Stderr, "approve", r)
				}
			}
			if err != nil {
				return err
			}
			if r.CountsUnderNoPolicy() {
				fmt.Fprintf(os.Stderr, "pinfs approve: report %s inherited member digests on the store's word (validated without a policy): this approval counts under no policy; approve with --policy FILE or --alias NAME\n", rd)
			}
			fmt.Fprintf(out, "APPROVED %s\n  report %s\n  signed by %s as %s\n  envelope %s\n", d, rd, s.KeyID(), *role, env)
			return nil
		}
	},
}

// whoami names the person or service running pinfs: user@host.
func whoami() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}
