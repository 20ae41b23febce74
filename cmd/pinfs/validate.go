package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/admission"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

var validateCmd = &command{
	name:  "validate",
	args:  "DIGEST --store STORE [--alias NAME] [--policy FILE] [--cache-dir DIR] [--deep] [--json]",
	short: "run the gate checks and write a validation report (VALIDATED)",
	long: `Validate a snapshot: run the gate checks, write a validation report
(canonical JSON, content addressed under reports/sha256/) and, when no
hard failure was found, mark the snapshot VALIDATED. VALIDATED is a
claim: anyone who can write the store can write a report and its marker.
pinfs approve therefore validates again itself, or signs the report you
name with --report (one you produced here).

A member's digest is a fact only once a validation has hashed its bytes:
a pin may have taken it from the digest cache or a shard's partial table,
which anyone who can write the store can forge. So validate re-reads and
hashes every member (as verify --deep does) except those whose object,
version, size and digest it inherits unchanged from a trusted parent; the
others get a HEAD. With a trust policy (--policy FILE, or with --alias the
policy kept with the gate) a parent is trusted when it is APPROVED under
that policy by approvals of reports that vouch for its digests under it.
Without one the store is the only trust root: a parent is trusted when it
has a passing report of its own in the store (a pinfs.report.v2 one, which
hashed what it had to). --deep hashes every member.

Hard failures (each named on stderr): a manifest or member table that does
not verify; every problem verify reports (unversioned members, pinned
versions missing or unreadable, bytes of a hashed member that do not match;
duplicate ids, unsafe paths); an id in two splits; a parent that does not
fetch and verify; a transform not pinned by a digest. With --alias NAME
the fences of gate NAME apply too: members (by id or digest) in its
revocation or benchmark lists, and a manifest built below its tombstone
watermark or benchmark fence. Without the gate (no --alias, or no gate
NAME yet) those are not checked; stderr says so.

The report says how many members were hashed and why (new: no trusted
parent has the path; changed: a trusted parent has it with other bytes or
at another version; inherited: as in a trusted parent, hashed only with
--deep) and which parents were trusted. It also holds the gate metrics:
members, bytes, unversioned, sources with a listing, parents resolvable,
duplicate, orphan and two-split ids, fence hits, the diff against the
first parent and a replay hash of the (id, digest) set. A failing report is written too, for the
audit trail, but does not make the snapshot VALIDATED.

The manifests and member tables of the snapshot and its parents are read
through the cache dir's verified metadata, as pinfs mount reads them; the
diff against the first parent walks both tables and keeps only counts.

Prints a summary and, on the last line, "report sha256:<report digest>";
--json prints the report with its digest in "report". Exit 0 when VALIDATED, 1 when a
hard failure keeps it out.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		vf := validationFlags(fs)
		asJSON := fs.Bool("json", false, "print the report as JSON")
		return func(ctx context.Context, args []string) error {
			if err := vf.check(); err != nil {
				return err
			}
			d, st, err := snapshotArg(ctx, args, *storeURL, "exactly one DIGEST", 0)
			if err != nil {
				return err
			}
			f, o, err := vf.inForce(ctx, st, "validate")
			if err != nil {
				return err
			}
			r, err := admission.Validate(ctx, st, d, f, o)
			if err != nil {
				return err
			}
			rd, err := admission.Save(ctx, st, r)
			if err != nil {
				return err
			}
			if *asJSON {
				err = printJSON(out, struct {
					Digest verify.Digest `json:"report"`
					*admission.Report
				}{rd, r})
			} else {
				printValidation(out, r, rd)
			}
			printFailures(os.Stderr, "validate", r)
			if err == nil && !r.OK {
				err = errCheckFailed
			}
			return err
		}
	},
}

// validationOpts are the flags pinfs validate and pinfs approve share:
// which gate's fences apply, which parents are trusted (the policy in
// force) and how deep members are checked.
type validationOpts struct {
	alias, policyFile string
	deep              bool
	jobs              int
	policy            *sign.Policy // loaded from policyFile by check
	meta              metaFlags
}

// validationFlags adds the flags of a validation to fs.
func validationFlags(fs *pflag.FlagSet) *validationOpts {
	o := &validationOpts{}
	fs.StringVar(&o.alias, "alias", "", "apply the fences and revocations of gate `NAME`, and its kept trust policy")
	fs.StringVar(&o.policyFile, "policy", "", "trust policy `FILE`: inherit digests only from parents approved under it (see docs/admission.md)")
	fs.BoolVar(&o.deep, "deep", false, "re-read and hash every member, even those inherited from a trusted parent")
	fs.IntVar(&o.jobs, "jobs", 16, "`N` members checked in parallel")
	o.meta = defineMetaFlags(fs)
	return o
}

// check checks the gate name and loads the policy file, before the store
// is opened.
func (o *validationOpts) check() (err error) {
	if o.alias != "" {
		if err := gate.CheckName(o.alias); err != nil {
			return usageError{err}
		}
	}
	o.policy, err = loadPolicy(o.policyFile)
	return err
}

// inForce returns the fences of gate --alias (nil without one) and the
// options of the validation: the policy in force (admission.PolicyInForce)
// is --policy, else the one the gate keeps, else none (the store is the
// trust root). cmd names the command in what it says on stderr.
func (o *validationOpts) inForce(ctx context.Context, st store.Store, cmd string) (*admission.Fences, admission.Options, error) {
	opts := admission.Options{Deep: o.deep, Jobs: o.jobs}
	var err error
	if opts.Meta, err = o.meta.reader(ctx, st); err != nil {
		return nil, opts, err
	}
	f, rec, err := gateFences(ctx, st, o.alias, cmd, os.Stderr)
	if err != nil {
		return nil, opts, err
	}
	opts.Policy, _, err = admission.PolicyInForce(ctx, st, o.policy, rec)
	return f, opts, err
}

// gateFences reads the head record of gate name and its fences; nil
// without a name, or when the gate does not exist yet (said on w by pinfs
// cmd).
func gateFences(ctx context.Context, st store.Store, name, cmd string, w io.Writer) (*admission.Fences, *gate.Record, error) {
	if name == "" {
		return nil, nil, nil
	}
	g, err := gate.Open(st, name)
	if err != nil {
		return nil, nil, err
	}
	rec, err := g.Head(ctx)
	if errors.Is(err, gate.ErrNoGate) {
		fmt.Fprintf(w, "pinfs %s: gate %s does not exist yet: validating without fences\n", cmd, name)
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	f, err := admission.LoadFences(ctx, st, rec)
	return f, rec, err
}

// printValidation prints the summary of r, "report <digest>" last.
func printValidation(w io.Writer, r *admission.Report, rd verify.Digest) {
	m := r.Metrics
	fmt.Fprintf(w, "manifest %s\n", r.Manifest)
	if g := r.Gate; g != nil {
		fmt.Fprintf(w, "gate %s generation %d: tombstone watermark %d, benchmark fence %d\n", g.Name, g.Generation, g.TombstoneWatermark, g.BenchmarkFence)
	} else {
		fmt.Fprintln(w, "gate: none (no revocations or fences checked)")
	}
	level := "versions checked"
	if r.Deep {
		level = "members re-read (deep)"
	}
	fmt.Fprintf(w, "members %d, bytes %d, %s %d, unversioned %d\n", m.Members, m.Bytes, level, m.VersionsChecked, m.Unversioned)
	printHashing(w, r.Hashing, m.Members)
	fmt.Fprintf(w, "sources %d (%d with a listing), parents %d (%d resolvable)\n", m.Sources, m.SourcesWithListing, m.Parents, m.ParentsResolvable)
	fmt.Fprintf(w, "ids: %d duplicate, %d in two splits, %d orphan; tombstone hits %d, benchmark hits %d\n",
		m.DuplicateIDs, m.IDsInTwoSplits, m.OrphanIDs, m.TombstoneHits, m.BenchmarkHits)
	if df := m.Diff; df != nil {
		fmt.Fprintf(w, "against %s: added %d, removed %d, changed %d, moved %d\n", df.Parent, df.Added, df.Removed, df.Changed, df.Moved)
	}
	if m.ReplayHash != "" {
		fmt.Fprintf(w, "replay hash %s\n", m.ReplayHash)
	}
	if r.OK {
		fmt.Fprintln(w, "state VALIDATED")
	} else {
		fmt.Fprintf(w, "not VALIDATED: %d hard failures (on stderr)\n", len(r.Failures))
	}
	fmt.Fprintf(w, "report %s\n", rd) // labelled: the manifest digest is another sha256
}

// printHashing prints which members of members were hashed and why.
func printHashing(w io.Writer, h *admission.Hashing, members int) {
	if h == nil {
		return
	}
	fmt.Fprintf(w, "hashed %d of %d members: %d new, %d changed, %d inherited\n", h.Hashed, members, h.New, h.Changed, h.Inherited)
	if h.Trust == admission.TrustPolicy {
		fmt.Fprintf(w, "trust: policy %s (digests are inherited from parents approved under it)\n", h.Policy)
	} else {
		fmt.Fprintln(w, "trust: store, no policy (digests are inherited from parents with a passing report in the store)")
	}
	for _, d := range h.Parents {
		fmt.Fprintf(w, "trusted parent %s\n", d)
	}
	for _, u := range h.Untrusted {
		fmt.Fprintf(w, "untrusted parent %s: %s\n", u.Parent, verify.Printable(u.Reason))
	}
}

// namedMembers is how many member ids a failure line names.
const namedMembers = 10

// printFailures writes one line per failure of r, as pinfs cmd: its kind,
// detail and the first members it concerns.
func printFailures(w io.Writer, cmd string, r *admission.Report) {
	for _, f := range r.Failures {
		line := fmt.Sprintf("pinfs %s: %s: %s", cmd, f.Kind, verify.Printable(f.Detail))
		if f.Count > 0 {
			ids := make([]string, 0, namedMembers)
			for _, id := range f.Members[:min(len(f.Members), namedMembers)] {
				ids = append(ids, verify.Printable(id))
			}
			line += fmt.Sprintf(" (%d members: %s", f.Count, strings.Join(ids, ", "))
			if more := f.Count - len(ids); more > 0 {
				line += fmt.Sprintf(" and %d more", more)
			}
			line += ")"
		}
		fmt.Fprintln(w, line)
	}
}
