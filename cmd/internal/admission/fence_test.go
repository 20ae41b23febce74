package admission

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/verify/b3"
)

func TestFenceForwardOnly(t *testing.T) {
	st := newLocal(t)
	ctx := t.Context()

	// A fence creates the gate, with no active snapshot.
	r := fence(t, st, FenceChange{Gate: "support", Tombstone: 2, Reason: "gdpr"})
	if r.Generation != 1 || r.Digest != "" || r.TombstoneWatermark != 2 || r.BenchmarkFence != 0 || r.Op != gate.OpFence ||
		r.Reason != "gdpr" || len(r.Revocations) != 0 {
		t.Fatalf("first fence: %+v", r)
	}
	for _, tc := range []struct {
		c    FenceChange
		want string
	}{
		{FenceChange{Gate: "support", Tombstone: 2}, "gate support: the tombstone watermark is at 2 already; a fence only moves forward (asked 2)"},
		{FenceChange{Gate: "support", Tombstone: 1}, "the tombstone watermark is at 2 already; a fence only moves forward (asked 1)"},
		{FenceChange{Gate: "support"}, "give exactly one of a tombstone watermark and a benchmark fence"},
		{FenceChange{Gate: "support", Tombstone: 3, Benchmark: 1}, "give exactly one"},
		{FenceChange{Gate: "support", Tombstone: -1}, "give exactly one"},
		{FenceChange{Gate: "Bad/Name", Tombstone: 3}, "gate name"},
	} {
		if _, err := Fence(ctx, st, tc.c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("fence %+v: %v; want %q", tc.c, err, tc.want)
		}
	}
	unchanged(t, st, "support", r, "refused fences")

	// The benchmark fence moves on its own; the watermark stays.
	r = fence(t, st, FenceChange{Gate: "support", Benchmark: 1})
	if r.Generation != 2 || r.TombstoneWatermark != 2 || r.BenchmarkFence != 1 {
		t.Fatalf("benchmark fence: %+v", r)
	}
	if _, err := Fence(ctx, st, FenceChange{Gate: "support", Benchmark: 1}); err == nil || !strings.Contains(err.Error(), "the benchmark fence is at 1 already; a fence only moves forward (asked 1)") {
		t.Errorf("benchmark fence at 1 again: %v", err)
	}
	unchanged(t, st, "support", r, "refused benchmark fences")
}

func TestFenceLists(t *testing.T) {
	st, kr := newLocal(t), newKeyring(t)
	alice := kr.signer("alice")
	p := kr.policy(1, "alice")
	ctx := t.Context()
	d := approved(t, st, at(0, 0), map[string]string{"a": "1"}, alice)
	act := activate(t, st, Activation{Gate: "support", Digest: d, Expect: -1, Policy: p})
	secret := b3.Of([]byte("secret")).String()

	// --revoke: stored content addressed, sorted and deduplicated, and
	// referenced from the record at the new watermark.
	r := fence(t, st, FenceChange{Gate: "support", Tombstone: 1, Entries: []string{"b", secret, "a", "b"}})
	if r.Digest != d || r.Policy != act.Policy {
		t.Errorf("a fence dropped the active digest or the kept policy: %+v", r)
	}
	if len(r.Revocations) != 1 || r.Revocations[0].At != 1 || r.Revocations[0].Count != 3 || len(r.Benchmarks) != 0 {
		t.Fatalf("revocations %+v, benchmarks %+v", r.Revocations, r.Benchmarks)
	}
	got, err := gate.GetList(ctx, st, r.Revocations[0].List)
	if err != nil || !slices.Equal(got, []string{"a", "b", secret}) {
		t.Fatalf("revocation list %v, %v", got, err)
	}

	// Later lists are added, never replacing earlier ones, per kind.
	r = fence(t, st, FenceChange{Gate: "support", Benchmark: 4, Entries: []string{"test/q"}})
	r = fence(t, st, FenceChange{Gate: "support", Tombstone: 5, Entries: []string{"c"}})
	r = fence(t, st, FenceChange{Gate: "support", Tombstone: 6})
	if len(r.Revocations) != 2 || r.Revocations[1].At != 5 || r.Revocations[1].Count != 1 ||
		len(r.Benchmarks) != 1 || r.Benchmarks[0].At != 4 || r.TombstoneWatermark != 6 || r.BenchmarkFence != 4 {
		t.Fatalf("after three more fences: %+v", r)
	}
	f, err := LoadFences(ctx, st, r)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Revoked["a"] || !f.Revoked[secret] || !f.Revoked["c"] || f.Revoked["test/q"] || !f.Benchmark["test/q"] || len(f.Benchmark) != 1 {
		t.Errorf("fences %+v", f)
	}
	if log := history(t, st, "support"); len(log) != 5 {
		t.Errorf("history has %d records; want 5", len(log))
	}
}

func TestReadList(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := ReadList(write("ok", "# revoked at 7\n\nuser/42  \n  blake3:"+strings.Repeat("ab", 32)+"\n"))
	if err != nil || !slices.Equal(got, []string{"user/42", "blake3:" + strings.Repeat("ab", 32)}) {
		t.Errorf("ReadList: %q, %v", got, err)
	}
	for name, tc := range map[string]struct{ content, want string }{
		"empty":   {"# nothing\n\n", "no member ids or digests"},
		"control": {"a\nb\x1bc\n", "control:2: control character"},
		// A digest that is not canonical is refused, naming the line:
		// accepted, it would never match a member.
		"upper":  {"a\n\nBLAKE3:" + strings.Repeat("AB", 32) + "\n", "upper:3: "},
		"hex":    {"blake3:" + strings.Repeat("AB", 32) + "\n", "hex:1: "},
		"short":  {"# c\nblake3:" + strings.Repeat("ab", 31) + "\n", "short:2: "},
		"spaced": {"blake3: " + strings.Repeat("ab", 32) + "\n", "spaced:1: "},
	} {
		if _, err := ReadList(write(name, tc.content)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", name, err, tc.want)
		}
	}
	if _, err := ReadList(filepath.Join(dir, "missing")); err == nil {
		t.Error("ReadList of a missing file succeeded")
	}
}
