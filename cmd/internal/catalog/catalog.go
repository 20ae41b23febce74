// Package catalog lists the manifests a store holds (`pinfs list`): the
// way back to a digest for a user who lost a pin's output.
//
// # Trust
//
// A store listing is a claim: anyone who can write the store can put a key
// under manifests/sha256/. List reads every listed manifest and keeps only
// those whose bytes hash to the digest their key names and parse as a
// manifest (verify.ParseManifest, as every mount does); every other key is
// reported in Listing.Invalid with the reason, never as a manifest. What an
// Entry says is then the manifest's own word (members, bytes, purpose,
// parents), except Time, which is the store's (S3 LastModified, a file's
// mtime) and covered by no digest. List does not read member tables or
// members: `pinfs verify` checks those.
//
// # State
//
// Entry.State is the admission state `pinfs status` reports (BUILDING,
// VALIDATED, APPROVED, ACTIVE), computed the same way: a passing
// validation report makes it VALIDATED, approvals that satisfy the policy
// given (Options.Policy) APPROVED, and a gate whose history points at it
// ACTIVE. List reads every gate's history once and the reports only of
// manifests that have a validation marker.
//
// # Cost
//
// One listing of manifests/, one of admission/, one of gates/ and each
// gate's history; then one GET per manifest (and the reports of validated
// ones), at most Options.Jobs at a time.
package catalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/admission"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

// Entry is one manifest of a store that verified against its digest.
type Entry struct {
	Digest verify.Digest `json:"digest"`
	// Time is when the store wrote the manifest (its pin time): the
	// store's word, not the manifest's. Zero for a store that cannot say.
	Time    time.Time       `json:"time,omitzero"`
	Members int64           `json:"members"`
	Bytes   int64           `json:"bytes"`
	Purpose string          `json:"purpose"`
	Parents []verify.Digest `json:"parents"`
	State   string          `json:"state"`
	// Gates are the gates whose history points at the manifest, as in
	// pinfs status.
	Gates []admission.AliasRef `json:"gates"`
}

// Invalid is a key under manifests/ that is not listed as a manifest, and why.
type Invalid struct {
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

// Listing is what List returns: the verified manifests, newest first, and
// the keys that did not verify.
type Listing struct {
	Store     string    `json:"store"`
	Manifests []Entry   `json:"manifests"`
	Invalid   []Invalid `json:"invalid"`
}

// Options tune List.
type Options struct {
	// Jobs is how many manifests are read at a time (default 16).
	Jobs int
	// Policy, when set, is the trust policy under which a validated
	// manifest counts as APPROVED (pinfs status --policy).
	Policy *sign.Policy
}

// manifestsPrefix is where manifests live: manifests/sha256/<hex>.
const manifestsPrefix = "manifests/sha256/"

// List lists the manifests st holds. It fails when the store cannot be
// listed or read; a manifest that does not verify is not an error but an
// entry of Listing.Invalid.
func List(ctx context.Context, st store.Store, o Options) (*Listing, error) {
	if o.Jobs <= 0 {
		o.Jobs = 16
	}
	keys, err := listInfo(ctx, st, manifestsPrefix)
	if err != nil {
		return nil, fmt.Errorf("list manifests: %w", err)
	}
	validated, err := markedValidated(ctx, st)
	if err != nil {
		return nil, err
	}
	gates, err := gateRefs(ctx, st)
	if err != nil {
		return nil, err
	}
	l := &Listing{Store: st.String(), Manifests: []Entry{}, Invalid: []Invalid{}}
	// o.Jobs workers take the keys in order; each result has its slot.
	results := make([]result, len(keys))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(o.Jobs, len(keys)) {
		wg.Go(func() {
			for i := range next {
				results[i] = load(ctx, st, keys[i], validated, gates, o.Policy)
			}
		})
	}
	for i := range keys {
		if ctx.Err() != nil {
			results[i].err = ctx.Err()
			continue
		}
		next <- i
	}
	close(next)
	wg.Wait()
	for _, r := range results {
		switch {
		case r.err != nil:
			return nil, r.err
		case r.invalid != nil:
			l.Invalid = append(l.Invalid, *r.invalid)
		case r.entry != nil:
			l.Manifests = append(l.Manifests, *r.entry)
		}
	}
	slices.SortFunc(l.Manifests, func(a, b Entry) int {
		return cmp.Or(b.Time.Compare(a.Time), strings.Compare(string(a.Digest), string(b.Digest)))
	})
	return l, nil
}

// result is the outcome of loading one listed key: an entry, an invalid
// key, nothing (a key that vanished since the listing) or a store error.
type result struct {
	entry   *Entry
	invalid *Invalid
	err     error
}

// load reads and verifies the manifest at k and works out its state.
func load(ctx context.Context, st store.Store, k store.KeyInfo, validated map[string]bool, gates map[verify.Digest][]admission.AliasRef, p *sign.Policy) result {
	h := strings.TrimPrefix(k.Key, manifestsPrefix)
	d, err := verify.ParseDigest("sha256:" + h)
	if err != nil {
		return result{invalid: &Invalid{Key: k.Key, Reason: "not named by a manifest digest (sha256:<64 hex>)"}}
	}
	b, err := store.GetAtMost(ctx, st, k.Key, store.MaxManifest)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return result{} // deleted since the listing
	case errors.Is(err, store.ErrTooLarge):
		return result{invalid: &Invalid{Key: k.Key, Reason: err.Error()}}
	case err != nil:
		return result{err: fmt.Errorf("manifest %s: %w", d, err)}
	}
	m, err := verify.ParseManifest(d, b)
	if err != nil {
		return result{invalid: &Invalid{Key: k.Key, Reason: err.Error()}}
	}
	e := &Entry{
		Digest: d, Time: k.Modified.UTC(), Members: m.Members.Count, Bytes: m.Members.Bytes, Purpose: m.Purpose,
		Parents: append([]verify.Digest{}, m.Parents...), State: admission.StateBuilding, Gates: gates[d],
	}
	if e.Gates == nil {
		e.Gates = []admission.AliasRef{}
	}
	if validated[h] {
		passed, err := admission.Validated(ctx, st, d)
		if err != nil {
			return result{err: err}
		}
		if len(passed) > 0 {
			e.State = admission.StateValidated
		}
	}
	switch {
	case len(e.Gates) > 0:
		e.State = admission.StateActive
	case e.State == admission.StateValidated && p != nil:
		if _, err := admission.Approved(ctx, st, d, p); err == nil {
			e.State = admission.StateApproved
		} else if ctx.Err() != nil {
			return result{err: ctx.Err()}
		}
	}
	return result{entry: e}
}

// listInfo lists the keys under prefix with their sizes and times, or
// with the keys only when st cannot say more.
func listInfo(ctx context.Context, st store.Store, prefix string) ([]store.KeyInfo, error) {
	if il, ok := st.(store.InfoLister); ok {
		return il.ListInfo(ctx, prefix)
	}
	kl, ok := st.(store.KeyLister)
	if !ok {
		return nil, fmt.Errorf("store %s cannot list keys", st)
	}
	keys, err := kl.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	infos := make([]store.KeyInfo, len(keys))
	for i, k := range keys {
		infos[i] = store.KeyInfo{Key: k}
	}
	return infos, nil
}

// markedValidated returns the hex digests of the manifests that have a
// validation marker (admission/sha256/<hex>/validated/…), from one listing:
// only those can be VALIDATED, and only their reports are read.
func markedValidated(ctx context.Context, st store.Store) (map[string]bool, error) {
	keys, err := listInfo(ctx, st, "admission/sha256/")
	if err != nil {
		return nil, fmt.Errorf("list validation markers: %w", err)
	}
	marked := map[string]bool{}
	for _, k := range keys {
		h, rest, _ := strings.Cut(strings.TrimPrefix(k.Key, "admission/sha256/"), "/")
		if path.Dir(rest) == "validated" {
			marked[h] = true
		}
	}
	return marked, nil
}

// gateRefs reads every gate's history once and returns, per manifest, the
// gates that point or pointed at it, as pinfs status reports them.
func gateRefs(ctx context.Context, st store.Store) (map[verify.Digest][]admission.AliasRef, error) {
	l, ok := st.(store.KeyLister)
	if !ok {
		return nil, fmt.Errorf("store %s cannot list keys: gates cannot be found", st)
	}
	names, err := gate.Names(ctx, l)
	if err != nil {
		return nil, err
	}
	refs := map[verify.Digest][]admission.AliasRef{}
	for _, name := range names {
		g, err := gate.Open(st, name)
		if err != nil {
			return nil, err
		}
		hist, err := g.Log(ctx) // newest first
		if err != nil {
			return nil, err
		}
		byDigest := map[verify.Digest]*admission.AliasRef{}
		var order []verify.Digest
		for i := len(hist) - 1; i >= 0; i-- {
			r := hist[i]
			if r.Digest == "" {
				continue
			}
			ref := byDigest[r.Digest]
			if ref == nil {
				ref = &admission.AliasRef{Gate: name, Current: hist[0].Digest == r.Digest}
				byDigest[r.Digest] = ref
				order = append(order, r.Digest)
			}
			ref.Generations = append(ref.Generations, r.Generation)
		}
		for _, d := range order {
			refs[d] = append(refs[d], *byDigest[d])
		}
	}
	return refs, nil
}
