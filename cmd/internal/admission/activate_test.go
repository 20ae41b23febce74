package admission

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
	"github.com/pinfs/pinfs/verify/sign"
)

// unchanged fails the test if gate name's head is not before.
func unchanged(t testing.TB, st store.Blobs, name string, before *gate.Record, what string) {
	t.Helper()
	if now := head(t, st, name); now.RecordDigest() != before.RecordDigest() {
		t.Fatalf("%s changed gate %s: generation %d %s (%s), was generation %d", what, name, now.Generation, now.Op, now.Digest, before.Generation)
	}
}

func TestActivateCreatesGate(t *testing.T) {
	st, kr := newLocal(t), newKeyring(t)
	alice := kr.signer("alice")
	p := kr.policy(1, "alice")
	d := approved(t, st, at(3, 1), map[string]string{"a": "alpha"}, alice)

	r := activate(t, st, Activation{Gate: "support", Digest: d, Expect: 0, Policy: p, Reason: "first"})
	if r.Generation != 1 || r.Digest != d || r.TombstoneWatermark != 3 || r.BenchmarkFence != 1 ||
		r.Op != gate.OpSet || r.Prev != "" || r.Reason != "first" || r.Policy != p.Digest() {
		t.Fatalf("created %+v", r)
	}
	if h := head(t, st, "support"); h.RecordDigest() != r.RecordDigest() {
		t.Fatalf("head %+v; want the record Activate returned", h)
	}
	// The gate keeps the policy it checked, self-contained in the store.
	kept, err := LoadPolicy(t.Context(), st, r.Policy)
	if err != nil || kept.Digest() != p.Digest() || kept.Threshold() != 1 {
		t.Fatalf("kept policy: %v", err)
	}
	if got := state(t, st, d, nil); got != StateActive {
		t.Errorf("state %s; want %s", got, StateActive)
	}
}

func TestActivatePolicy(t *testing.T) {
	st, kr := newLocal(t), newKeyring(t)
	alice, bob := kr.signer("alice"), kr.signer("bob")
	ctx := t.Context()
	d1 := approved(t, st, at(0, 0), map[string]string{"a": "1"}, alice)

	// No policy given and no gate to keep one: refused, nothing created.
	if _, err := Activate(ctx, st, Activation{Gate: "support", Digest: d1, Expect: -1}); !errors.Is(err, ErrNoPolicy) {
		t.Fatalf("activate without a policy: %v; want ErrNoPolicy", err)
	}
	g, _ := gate.Open(st, "support")
	if _, err := g.Head(ctx); !errors.Is(err, gate.ErrNoGate) {
		t.Fatalf("a refused activation created the gate: %v", err)
	}

	p := kr.policy(1, "alice")
	activate(t, st, Activation{Gate: "support", Digest: d1, Expect: -1, Policy: p})

	// Without --policy the gate's kept policy decides: alice counts, bob
	// does not.
	d2 := approved(t, st, at(0, 0), map[string]string{"a": "2"}, alice)
	r := activate(t, st, Activation{Gate: "support", Digest: d2, Expect: 1})
	if r.Generation != 2 || r.Policy != p.Digest() {
		t.Fatalf("activation under the kept policy: %+v", r)
	}
	d3 := approved(t, st, at(0, 0), map[string]string{"a": "3"}, bob)
	before := head(t, st, "support")
	if _, err := Activate(ctx, st, Activation{Gate: "support", Digest: d3, Expect: -1}); !errors.Is(err, sign.ErrNotApproved) {
		t.Fatalf("activate %s approved by bob only under the kept policy {alice}: %v; want ErrNotApproved", d3, err)
	}
	unchanged(t, st, "support", before, "a refused activation")

	// A policy given replaces the kept one from then on.
	pb := kr.policy(1, "bob")
	if r := activate(t, st, Activation{Gate: "support", Digest: d3, Expect: -1, Policy: pb}); r.Policy != pb.Digest() {
		t.Fatalf("activation with --policy keeps %s; want %s", r.Policy, pb.Digest())
	}
	d4 := approved(t, st, at(0, 0), map[string]string{"a": "4"}, alice)
	if _, err := Activate(ctx, st, Activation{Gate: "support", Digest: d4, Expect: -1}); !errors.Is(err, sign.ErrNotApproved) {
		t.Fatalf("activate %s approved by alice under the new kept policy {bob}: %v; want ErrNotApproved", d4, err)
	}
}

func TestActivateRefusesUnapproved(t *testing.T) {
	st, kr := newLocal(t), newKeyring(t)
	alice := kr.signer("alice")
	p := kr.policy(1, "alice")
	ctx := t.Context()
	activate(t, st, Activation{Gate: "support", Digest: approved(t, st, at(0, 0), map[string]string{"a": "1"}, alice), Expect: -1, Policy: p})
	before := head(t, st, "support")

	building := pinFiles(t, st, at(0, 0), map[string]string{"a": "2"})
	validated := pinFiles(t, st, at(0, 0), map[string]string{"a": "3"})
	validate(t, st, validated)
	for _, d := range []verify.Digest{building, validated} {
		_, err := Activate(ctx, st, Activation{Gate: "support", Digest: d, Expect: -1, Policy: p})
		if !errors.Is(err, sign.ErrNotApproved) || !strings.Contains(err.Error(), d.String()) {
			t.Errorf("activate unapproved %s: %v; want ErrNotApproved naming it", d, err)
		}
		if got := state(t, st, d, p); got == StateActive || got == StateApproved {
			t.Errorf("%s is %s after a refused activation", d, got)
		}
	}
	unchanged(t, st, "support", before, "activating unapproved snapshots")
}

func TestActivateFenced(t *testing.T) {
	st, kr := newLocal(t), newKeyring(t)
	alice := kr.signer("alice")
	p := kr.policy(1, "alice")
	ctx := t.Context()
	activate(t, st, Activation{Gate: "support", Digest: approved(t, st, at(3, 1), map[string]string{"a": "1"}, alice), Expect: -1, Policy: p})
	before := head(t, st, "support")

	for _, tc := range []struct {
		tw, bf int64
		want   string
	}{
		{4, 1, "built at tombstone watermark 4, gate support is at 3: build a new manifest at the gate's watermark"},
		{2, 1, "built at tombstone watermark 2, gate support is at 3: build a new manifest at the gate's watermark"},
		{3, 0, "built at benchmark fence 0, gate support is at 1: build a new manifest at the gate's fence"},
		{3, 2, "built at benchmark fence 2, gate support is at 1: build a new manifest at the gate's fence"},
	} {
		d := approved(t, st, at(tc.tw, tc.bf), map[string]string{"a": "2"}, alice)
		_, err := Activate(ctx, st, Activation{Gate: "support", Digest: d, Expect: -1, Policy: p})
		if !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("activate a snapshot built at %d/%d: %v; want ErrFenced saying %q", tc.tw, tc.bf, err, tc.want)
		}
		if got := state(t, st, d, p); got != StateApproved {
			t.Errorf("the fenced candidate is %s; want it to stay %s", got, StateApproved)
		}
	}
	unchanged(t, st, "support", before, "fenced activations")

	// Once the gate's fence reaches the snapshot's watermark it activates.
	d4 := approved(t, st, at(4, 1), map[string]string{"a": "4"}, alice)
	fence(t, st, FenceChange{Gate: "support", Tombstone: 4})
	if r := activate(t, st, Activation{Gate: "support", Digest: d4, Expect: 2}); r.Generation != 3 || r.Digest != d4 || r.TombstoneWatermark != 4 {
		t.Fatalf("activation at the new watermark: %+v", r)
	}
}

func TestActivateRevokedMember(t *testing.T) {
	st, kr := newLocal(t), newKeyring(t)
	alice := kr.signer("alice")
	p := kr.policy(1, "alice")
	ctx := t.Context()
	activate(t, st, Activation{Gate: "support", Digest: approved(t, st, at(1, 0), map[string]string{"a": "1", "b": "1"}, alice), Expect: -1, Policy: p})
	fence(t, st, FenceChange{Gate: "support", Tombstone: 2, Entries: []string{"b", b3.Of([]byte("secret")).String()}})
	before := head(t, st, "support")

	// Built at the new watermark (validated without the gate, so that only
	// the activation's own check stands between it and the gate).
	byID := approved(t, st, at(2, 0), map[string]string{"a": "2", "b": "2"}, alice)
	byDigest := approved(t, st, at(2, 0), map[string]string{"a": "2", "c": "secret"}, alice)
	for d, member := range map[verify.Digest]string{byID: "b (revoked)", byDigest: "c (revoked)"} {
		_, err := Activate(ctx, st, Activation{Gate: "support", Digest: d, Expect: -1})
		if !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), member) {
			t.Errorf("activate %s holding a revoked member: %v; want ErrFenced naming %s", d, err, member)
		}
	}
	unchanged(t, st, "support", before, "activating revoked members")
	clean := approved(t, st, at(2, 0), map[string]string{"a": "2"}, alice)
	activate(t, st, Activation{Gate: "support", Digest: clean, Expect: -1})
}

// interleaved commits change, once, through the underlying store just
// before the first Swap it is asked for: another writer that wins between
// a commit's read and its conditional write. It counts the Swaps.
type interleaved struct {
	gateStore
	change func() error
	swaps  atomic.Int32
}

func (s *interleaved) Swap(ctx context.Context, key string, data []byte, rev string) error {
	if s.swaps.Add(1) == 1 {
		if err := s.change(); err != nil {
			return err
		}
	}
	return s.gateStore.Swap(ctx, key, data, rev)
}

func TestActivateExpectGeneration(t *testing.T) {
	st, kr := newLocal(t), newKeyring(t)
	alice := kr.signer("alice")
	p := kr.policy(1, "alice")
	ctx := t.Context()
	d1 := approved(t, st, at(0, 0), map[string]string{"a": "1"}, alice)
	d2 := approved(t, st, at(0, 0), map[string]string{"a": "2"}, alice)

	// Expect 0: the gate must not exist yet.
	activate(t, st, Activation{Gate: "support", Digest: d1, Expect: 0, Policy: p})
	before := head(t, st, "support")
	for _, n := range []int64{0, 2, 7} {
		_, err := Activate(ctx, st, Activation{Gate: "support", Digest: d2, Expect: n})
		if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "at generation 1") {
			t.Errorf("activate expecting generation %d at 1: %v; want ErrConflict naming generation 1", n, err)
		}
	}
	unchanged(t, st, "support", before, "activations expecting another generation")

	// Another activation commits between the read and the write: the
	// expecting activation fails with ErrConflict and does not try again.
	d3 := approved(t, st, at(0, 0), map[string]string{"a": "3"}, alice)
	s := &interleaved{gateStore: st, change: func() error {
		_, err := Activate(ctx, st, Activation{Gate: "support", Digest: d3, Expect: 1})
		return err
	}}
	_, err := Activate(ctx, s, Activation{Gate: "support", Digest: d2, Expect: 1})
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "moved to generation 2 while this change was prepared at generation 1") {
		t.Fatalf("activate expecting 1 when the gate moved under it: %v; want ErrConflict saying it moved", err)
	}
	if n := s.swaps.Load(); n != 1 {
		t.Errorf("an expecting activation swapped %d times; want once, never a retry", n)
	}
	if h := head(t, st, "support"); h.Generation != 2 || h.Digest != d3 {
		t.Fatalf("head generation %d %s; want 2 %s (the interleaved commit only)", h.Generation, h.Digest, d3)
	}

	// Without Expect the same interleaving is retried: re-checked and
	// committed on top.
	d4 := approved(t, st, at(0, 0), map[string]string{"a": "4"}, alice)
	s = &interleaved{gateStore: st, change: func() error {
		_, err := Activate(ctx, st, Activation{Gate: "support", Digest: d1, Expect: 2})
		return err
	}}
	r, err := Activate(ctx, s, Activation{Gate: "support", Digest: d4, Expect: -1})
	if err != nil || r.Generation != 4 || s.swaps.Load() != 2 {
		t.Fatalf("activate without Expect over an interleaved commit: %+v, %d swaps, %v; want generation 4 after 2 swaps", r, s.swaps.Load(), err)
	}
	if log := history(t, st, "support"); len(log) != 4 || log[1].Digest != d1 || log[0].Digest != d4 {
		t.Fatalf("history %d records", len(log))
	}
}

func TestRollback(t *testing.T) {
	st, kr := newLocal(t), newKeyring(t)
	alice := kr.signer("alice")
	p := kr.policy(1, "alice")
	ctx := t.Context()
	d1 := approved(t, st, at(1, 0), map[string]string{"a": "1", "test/q": "q"}, alice)
	d2 := approved(t, st, at(1, 0), map[string]string{"a": "2"}, alice)
	never := approved(t, st, at(1, 0), map[string]string{"a": "never"}, alice)
	activate(t, st, Activation{Gate: "support", Digest: d1, Expect: -1, Policy: p})
	activate(t, st, Activation{Gate: "support", Digest: d2, Expect: -1})
	rollback := func(d verify.Digest) (*gate.Record, error) {
		return Activate(ctx, st, Activation{Gate: "support", Digest: d, Expect: -1, Rollback: true, Reason: "bad eval"})
	}

	// Back to a digest the gate had: a higher generation, op rollback.
	r, err := rollback(d1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Generation != 3 || r.Digest != d1 || r.Op != gate.OpRollback || r.Reason != "bad eval" || r.TombstoneWatermark != 1 {
		t.Fatalf("rollback committed %+v", r)
	}
	if log := history(t, st, "support"); len(log) != 3 || log[0].Digest != d1 || log[1].Digest != d2 || log[2].Digest != d1 {
		t.Fatalf("history after the rollback: %d records", len(log))
	}

	before := head(t, st, "support")
	for _, tc := range []struct {
		d    verify.Digest
		want string
	}{
		{never, "was never active in gate support"},
		{d1, "is at " + d1.String() + " already"},
	} {
		if _, err := rollback(tc.d); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("rollback to %s: %v; want %q", tc.d, err, tc.want)
		}
	}
	if _, err := Activate(ctx, st, Activation{Gate: "nogate", Digest: d1, Expect: -1, Rollback: true, Policy: p}); !errors.Is(err, gate.ErrNoGate) {
		t.Errorf("rollback of a gate that does not exist: %v; want ErrNoGate", err)
	}
	unchanged(t, st, "support", before, "refused rollbacks")

	// A benchmark fence moved since d1 and d2 were active (with a list
	// naming one of d1's members): rolling back to either would cross it.
	fence(t, st, FenceChange{Gate: "support", Benchmark: 1, Entries: []string{"test/q"}})
	d3 := approved(t, st, at(1, 1), map[string]string{"a": "3"}, alice)
	activate(t, st, Activation{Gate: "support", Digest: d3, Expect: -1})
	before = head(t, st, "support")
	for _, d := range []verify.Digest{d1, d2} {
		if _, err := rollback(d); !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "built at benchmark fence 0, below gate support's 1") {
			t.Errorf("rollback to %s across the benchmark fence: %v; want ErrFenced", d, err)
		}
	}
	unchanged(t, st, "support", before, "rollbacks across the benchmark fence")
	// d3 was built at both fences: after d4, a rollback to d3 commits.
	d4 := approved(t, st, at(1, 1), map[string]string{"a": "4"}, alice)
	activate(t, st, Activation{Gate: "support", Digest: d4, Expect: -1})
	if r, err := rollback(d3); err != nil || r.Generation != before.Generation+2 || r.Op != gate.OpRollback {
		t.Fatalf("rollback to %s: %+v, %v", d3, r, err)
	}

	// After the tombstone watermark moved past them, no earlier digest can
	// come back: they may hold data revoked since.
	fence(t, st, FenceChange{Gate: "support", Tombstone: 2, Entries: []string{"a"}})
	before = head(t, st, "support")
	for _, d := range []verify.Digest{d1, d4} {
		_, err := rollback(d)
		if !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "built at tombstone watermark 1, below gate support's 2: a rollback must not resurrect revoked data") {
			t.Errorf("rollback to %s below the watermark: %v; want ErrFenced saying it would resurrect revoked data", d, err)
		}
	}
	unchanged(t, st, "support", before, "rollbacks below the watermark")
}

// TestRollbackRevokedMember: a rollback checks the members of the digest
// it goes back to against every revocation list. A fence advance adds a
// list only with a higher watermark, which the watermark check refuses on
// its own; here a list is added at the gate's current watermark directly
// through the gate, so that only the member check stands in the way.
func TestRollbackRevokedMember(t *testing.T) {
	st, kr := newLocal(t), newKeyring(t)
	alice := kr.signer("alice")
	p := kr.policy(1, "alice")
	ctx := t.Context()
	d1 := approved(t, st, at(1, 0), map[string]string{"a": "1", "pii": "x"}, alice)
	d2 := approved(t, st, at(1, 0), map[string]string{"a": "2"}, alice)
	activate(t, st, Activation{Gate: "support", Digest: d1, Expect: -1, Policy: p})
	activate(t, st, Activation{Gate: "support", Digest: d2, Expect: -1})
	list, n, err := gate.PutList(ctx, st, []string{"pii"})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := gate.Open(st, "support")
	if _, err := g.Update(ctx, false, func(cur *gate.Record) (*gate.Record, error) {
		cur.Op, cur.Revocations = gate.OpFence, append(cur.Revocations, gate.Fenced{At: 1, List: list, Count: n})
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	before := head(t, st, "support")
	_, err = Activate(ctx, st, Activation{Gate: "support", Digest: d1, Expect: -1, Rollback: true})
	if !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "pii (revoked)") {
		t.Fatalf("rollback to %s holding a revoked member: %v; want ErrFenced naming pii", d1, err)
	}
	unchanged(t, st, "support", before, "a rollback to revoked data")
}

// TestActivateSameDigest: setting an alias to the digest it is at already
// commits nothing, but only once every check an activation makes has
// passed: after a fence moved past the digest, or under a policy that
// does not approve it, it is refused as any other activation would be.
func TestActivateSameDigest(t *testing.T) {
	st, kr := newLocal(t), newKeyring(t)
	alice := kr.signer("alice")
	kr.signer("bob")
	p, pb := kr.policy(1, "alice"), kr.policy(1, "bob")
	ctx := t.Context()
	d := approved(t, st, at(1, 0), map[string]string{"a": "1"}, alice)
	first := activate(t, st, Activation{Gate: "support", Digest: d, Expect: -1, Policy: p})
	for _, expect := range []int64{-1, 1} {
		if r := activate(t, st, Activation{Gate: "support", Digest: d, Expect: expect}); r.RecordDigest() != first.RecordDigest() {
			t.Fatalf("alias set to the current digest (expect %d) committed generation %d", expect, r.Generation)
		}
	}
	if _, err := Activate(ctx, st, Activation{Gate: "support", Digest: d, Expect: 0}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("alias set to the current digest expecting generation 0: %v; want ErrConflict", err)
	}
	if _, err := Activate(ctx, st, Activation{Gate: "support", Digest: d, Expect: -1, Policy: pb}); !errors.Is(err, sign.ErrNotApproved) {
		t.Errorf("alias set to the current digest under a policy that does not approve it: %v; want ErrNotApproved", err)
	}
	f := fence(t, st, FenceChange{Gate: "support", Tombstone: 2})
	if _, err := Activate(ctx, st, Activation{Gate: "support", Digest: d, Expect: -1}); !errors.Is(err, ErrFenced) {
		t.Errorf("alias set to the current digest after a fence moved past it: %v; want ErrFenced", err)
	}
	unchanged(t, st, "support", f, "alias set to the current digest")
}
