package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/admission"
)

var statusCmd = &command{
	name:  "status",
	args:  "DIGEST --store STORE [--policy FILE] [--json]",
	short: "a snapshot's admission state: reports, signatures, gates",
	long: `Print where snapshot DIGEST stands: BUILDING (pinned), VALIDATED (a
passing validation report), APPROVED (approvals that satisfy a trust
policy) or ACTIVE (a gate has pointed at it); its passing reports; every
stored signature with who signed, in which role, when, and under which
policies it is valid; whether the snapshot is approved under --policy FILE
and under the policy kept by each gate that points at it; and the gates
and generations that point at it.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		policyFile := policyFlag(fs)
		asJSON := fs.Bool("json", false, "print the status as JSON")
		return func(ctx context.Context, args []string) error {
			d, st, err := snapshotArg(ctx, args, *storeURL, "exactly one DIGEST", 0)
			if err != nil {
				return err
			}
			p, err := loadPolicy(*policyFile)
			if err != nil {
				return err
			}
			s, err := admission.StatusOf(ctx, st, d, p)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(out, s)
			}
			printStatus(out, s)
			return nil
		}
	},
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
