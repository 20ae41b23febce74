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
	args:  "DIGEST --key KEY --store STORE [--role ROLE] [--report REPORT]",
	short: "sign a VALIDATED snapshot and its validation report: APPROVED",
	long: `Sign the manifest digest DIGEST together with the digest of a passing
validation report of it (the newest, or --report) with the ed25519 key
KEY (from pinfs key generate), and store the signature beside the
manifest: a DSSE envelope carrying an in-toto Statement whose subjects are
the two digests and whose predicate is the approval and its role. The
manifest is never rewritten. A snapshot that is not VALIDATED is refused.

Whether the approvals are enough is decided by a trust policy when the
snapshot is used: pinfs verify --policy, pinfs mount --policy, pinfs alias
set, pinfs admit. The envelope's digest is printed on the last line.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		keyFile := fs.String("key", "", "private key `FILE` (PREFIX.key from pinfs key generate)")
		role := fs.String("role", "approver", "the `ROLE` the signer approves in, e.g. data-owner")
		report := fs.String("report", "", "validation report `DIGEST` to sign (default: the newest passing one)")
		return func(ctx context.Context, args []string) error {
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
			env, rd, err := admission.Approve(ctx, st, d, s, rd, sign.Approval{Role: *role, Approver: whoami()})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "APPROVED %s\n  report %s\n  signed by %s as %s\n%s\n", d, rd, s.KeyID(), *role, env)
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
