package gate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
)

// snap returns a made-up snapshot digest.
func snap(s string) verify.Digest { return verify.SHA256([]byte(s)) }

func newLocal(t *testing.T) (*localstore.Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st, dir
}

func openGate(t *testing.T, st store.Blobs, name string) *Gate {
	t.Helper()
	g, err := Open(st, name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// change returns an Update fn that applies edit to the current record
// (an empty one if there is none).
func change(edit func(*Record)) func(*Record) (*Record, error) {
	return func(cur *Record) (*Record, error) {
		if cur == nil {
			cur = &Record{}
		}
		edit(cur)
		return cur, nil
	}
}

// set returns an Update fn that activates d.
func set(d verify.Digest) func(*Record) (*Record, error) {
	return change(func(r *Record) { r.Op, r.Digest = OpSet, d })
}

// fence returns an Update fn that moves the tombstone watermark to n.
func fence(n int64) func(*Record) (*Record, error) {
	return change(func(r *Record) { r.Op, r.TombstoneWatermark = OpFence, n })
}

func mustUpdate(t *testing.T, g *Gate, fn func(*Record) (*Record, error)) *Record {
	t.Helper()
	r, err := g.Update(t.Context(), false, fn)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestUpdateFillsRecord(t *testing.T) {
	st, _ := newLocal(t)
	g := openGate(t, st, "customer-support-latest")
	if _, err := g.Head(t.Context()); !errors.Is(err, ErrNoGate) {
		t.Fatalf("Head of a new gate = %v; want ErrNoGate", err)
	}
	if _, err := g.Log(t.Context()); !errors.Is(err, ErrNoGate) {
		t.Fatalf("Log of a new gate = %v; want ErrNoGate", err)
	}
	before := time.Now().Add(-time.Second)
	r1 := mustUpdate(t, g, fence(3))
	if r1.Schema != Schema || r1.Name != g.Name() || r1.Generation != 1 || r1.Prev != "" || r1.By == "" || r1.TombstoneWatermark != 3 {
		t.Fatalf("first record = %+v", r1)
	}
	if ts, err := time.Parse(time.RFC3339, r1.Time); err != nil || ts.Before(before) || ts.Location() != time.UTC {
		t.Fatalf("Time = %q, %v", r1.Time, err)
	}
	r2 := mustUpdate(t, g, set(snap("a")))
	if r2.Generation != 2 || r2.Prev != r1.RecordDigest() || r2.Digest != snap("a") || r2.TombstoneWatermark != 3 {
		t.Fatalf("second record = %+v; want generation 2 after %s", r2, r1.RecordDigest())
	}
	r3, err := g.Update(t.Context(), false, func(cur *Record) (*Record, error) {
		cur.Op, cur.Digest, cur.By, cur.Reason = OpRollback, snap("old"), "alice@ci", "bad eval"
		cur.Generation, cur.Prev, cur.Name = 99, snap("x"), "other" // Update's to fill
		return cur, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r3.Generation != 3 || r3.Prev != r2.RecordDigest() || r3.Name != g.Name() || r3.By != "alice@ci" || r3.Reason != "bad eval" {
		t.Fatalf("third record = %+v", r3)
	}
	head, err := g.Head(t.Context())
	if err != nil || head.RecordDigest() != r3.RecordDigest() {
		t.Fatalf("Head = %+v, %v; want %+v", head, err, r3)
	}
	log, err := g.Log(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 3 || log[0].RecordDigest() != r3.RecordDigest() || log[1].RecordDigest() != r2.RecordDigest() || log[2].RecordDigest() != r1.RecordDigest() {
		t.Fatalf("Log = %+v", log)
	}
	// The head's bytes are canonical, and also stored under records/.
	data, err := st.Get(t.Context(), HeadKey(g.Name()))
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := st.Get(t.Context(), RecordKey(g.Name(), verify.SHA256(data))); err != nil || string(rec) != string(data) {
		t.Fatalf("records/ copy of the head: %q, %v", rec, err)
	}
	if canon, err := jcs.Canonicalize(data); err != nil || string(canon) != string(data) {
		t.Fatalf("head is not canonical JSON: %s", data)
	}
}

// TestUpdateAborts: an error from fn, or a change that is no valid
// successor, writes nothing.
func TestUpdateAborts(t *testing.T) {
	st, _ := newLocal(t)
	g := openGate(t, st, "g")
	errFn := errors.New("the candidate is not approved")
	if _, err := g.Update(t.Context(), true, func(*Record) (*Record, error) { return nil, errFn }); err != errFn {
		t.Fatalf("Update = %v; want fn's error as it is", err)
	}
	if keys, err := st.List(t.Context(), ""); err != nil || len(keys) != 0 {
		t.Fatalf("after an aborted create the store holds %q, %v", keys, err)
	}
	mustUpdate(t, g, set(snap("a")))
	r2 := mustUpdate(t, g, func(cur *Record) (*Record, error) {
		cur.Op, cur.TombstoneWatermark, cur.BenchmarkFence = OpFence, 5, 7
		cur.Revocations = []Fenced{{At: 2, List: snap("list"), Count: 2}}
		return cur, nil
	})
	keys, _ := st.List(t.Context(), "")
	for _, tc := range []struct {
		name string
		fn   func(*Record) (*Record, error)
		want string
	}{
		{"fn error", func(*Record) (*Record, error) { return nil, errFn }, errFn.Error()},
		{"no record", func(*Record) (*Record, error) { return nil, nil }, "no record"},
		{"watermark back", func(c *Record) (*Record, error) { c.TombstoneWatermark = 4; return c, nil }, "tombstone watermark back"},
		{"fence back", func(c *Record) (*Record, error) { c.BenchmarkFence = 6; return c, nil }, "benchmark fence back"},
		{"revocations dropped", func(c *Record) (*Record, error) { c.Revocations = nil; return c, nil }, "drops or changes revocation"},
		{"revocation changed", func(c *Record) (*Record, error) { c.Revocations[0].Count = 1; return c, nil }, "drops or changes revocation"},
		{"digest cleared", func(c *Record) (*Record, error) { c.Op, c.Digest = OpFence, ""; return c, nil }, "drops the active digest"},
		{"unknown op", func(c *Record) (*Record, error) { c.Op = "delete"; return c, nil }, `op "delete"`},
		{"bad digest", func(c *Record) (*Record, error) { c.Digest = "latest"; return c, nil }, "digests only"},
		{"list above fence", func(c *Record) (*Record, error) {
			c.Revocations = append(c.Revocations, Fenced{At: 9, List: snap("l2")})
			return c, nil
		}, "out of range"},
	} {
		_, err := g.Update(t.Context(), false, tc.fn)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Update = %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
	if head, err := g.Head(t.Context()); err != nil || head.RecordDigest() != r2.RecordDigest() {
		t.Errorf("after refused changes Head = %+v, %v; want %+v", head, err, r2)
	}
	if after, _ := st.List(t.Context(), ""); len(after) != len(keys) {
		t.Errorf("refused changes wrote %d keys", len(after)-len(keys))
	}
}

// TestUpdateLostRace: a commit that lands between Update's read and its
// swap makes it fail with ErrConflict naming both generations, or, with
// retry, run fn again on the new head.
func TestUpdateLostRace(t *testing.T) {
	st, _ := newLocal(t)
	g := openGate(t, st, "g")
	other := openGate(t, st, "g")
	mustUpdate(t, g, set(snap("a")))
	interfere := func(calls *int, fn func(*Record) (*Record, error)) func(*Record) (*Record, error) {
		return func(cur *Record) (*Record, error) {
			if *calls++; *calls == 1 {
				mustUpdate(t, other, fence(cur.TombstoneWatermark+1))
			}
			return fn(cur)
		}
	}
	var calls int
	_, err := g.Update(t.Context(), false, interfere(&calls, set(snap("b"))))
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "gate g moved to generation 2 while this change was prepared at generation 1") {
		t.Fatalf("Update = %v; want ErrConflict saying the gate moved", err)
	}
	if head, _ := g.Head(t.Context()); head.Digest != snap("a") || head.Generation != 2 {
		t.Fatalf("head after the lost race = %+v", head)
	}
	calls = 0
	r, err := g.Update(t.Context(), true, interfere(&calls, set(snap("b"))))
	if err != nil || calls != 2 || r.Generation != 4 || r.Digest != snap("b") || r.TombstoneWatermark != 2 {
		t.Fatalf("Update with retry = %+v, %v after %d calls; want generation 4 after 2", r, err, calls)
	}
	// Expect refuses a change prepared at an older generation.
	_, err = g.Update(t.Context(), false, func(cur *Record) (*Record, error) {
		if err := g.Expect(cur, 3); err != nil {
			return nil, err
		}
		return set(snap("c"))(cur)
	})
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "moved to generation 4 while this change was prepared at generation 3") {
		t.Fatalf("Update expecting generation 3 = %v", err)
	}
	if err := g.Expect(nil, 0); err != nil {
		t.Fatalf("Expect(nil, 0) = %v", err)
	}
}

// TestLogRefusesBrokenHistory: a tampered record, a missing one (a gap),
// a generation that skips (a fork spliced in), and a bad head are refused.
func TestLogRefusesBrokenHistory(t *testing.T) {
	build := func(t *testing.T) (*localstore.Store, string, *Gate, []*Record) {
		st, dir := newLocal(t)
		g := openGate(t, st, "g")
		var rs []*Record
		for i := range 4 {
			rs = append(rs, mustUpdate(t, g, fence(int64(i))))
		}
		return st, dir, g, rs
	}
	recordFile := func(dir string, r *Record) string {
		return filepath.Join(dir, filepath.FromSlash(RecordKey("g", r.RecordDigest())))
	}
	t.Run("tampered", func(t *testing.T) {
		st, dir, g, rs := build(t)
		key := RecordKey("g", rs[1].RecordDigest())
		data, _ := st.Get(t.Context(), key)
		tamper(t, dir, key, strings.Replace(string(data), `"tombstoneWatermark":1`, `"tombstoneWatermark":0`, 1))
		if _, err := g.Log(t.Context()); err == nil || !strings.Contains(err.Error(), "generation 2") || !strings.Contains(err.Error(), "tampered") {
			t.Fatalf("Log = %v; want generation 2 tampered", err)
		}
	})
	t.Run("gap", func(t *testing.T) {
		_, dir, g, rs := build(t)
		os.Remove(recordFile(dir, rs[0]))
		if _, err := g.Log(t.Context()); err == nil || !strings.Contains(err.Error(), "generation 1") || !strings.Contains(err.Error(), "gap") {
			t.Fatalf("Log = %v; want a gap at generation 1", err)
		}
	})
	t.Run("head not in records", func(t *testing.T) {
		st, dir, g, rs := build(t)
		os.Remove(recordFile(dir, rs[3])) // a commit that stopped after its head write
		if log, err := g.Log(t.Context()); err != nil || len(log) != 4 {
			t.Fatalf("Log = %d records, %v; want the 4 of the history", len(log), err)
		}
		if b, err := st.Get(t.Context(), RecordKey("g", rs[3].RecordDigest())); err != nil || verify.SHA256(b) != rs[3].RecordDigest() {
			t.Fatalf("Log did not store the head's record: %v", err)
		}
		tamper(t, dir, RecordKey("g", rs[3].RecordDigest()), "{}")
		if _, err := g.Log(t.Context()); err == nil || !strings.Contains(err.Error(), rs[3].RecordDigest().String()) || !strings.Contains(err.Error(), "tampered") {
			t.Fatalf("Log = %v; want the head's record tampered", err)
		}
	})
	t.Run("skipped generation", func(t *testing.T) {
		st, _, g, rs := build(t)
		forged := rs[3].clone()
		forged.Generation, forged.Prev = 6, rs[3].RecordDigest()
		data, _ := forged.encode()
		st.Put(t.Context(), RecordKey("g", verify.SHA256(data)), data)
		_, rev, _ := st.Load(t.Context(), HeadKey("g"))
		if err := st.Swap(t.Context(), HeadKey("g"), data, rev); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Log(t.Context()); err == nil || !strings.Contains(err.Error(), "generation 6 follows generation 4") {
			t.Fatalf("Log = %v; want generation 6 follows generation 4", err)
		}
	})
	t.Run("head of another gate", func(t *testing.T) {
		st, _, _, _ := build(t)
		data, _ := st.Get(t.Context(), HeadKey("g"))
		st.Swap(t.Context(), HeadKey("h"), data, "")
		h := openGate(t, st, "h")
		if _, err := h.Head(t.Context()); err == nil || !strings.Contains(err.Error(), `names gate "g", not "h"`) {
			t.Fatalf("Head = %v; want a refusal naming the other gate", err)
		}
	})
	t.Run("head not canonical", func(t *testing.T) {
		st, _, g, _ := build(t)
		data, rev, _ := st.Load(t.Context(), HeadKey("g"))
		st.Swap(t.Context(), HeadKey("g"), append([]byte(" "), data...), rev)
		if _, err := g.Head(t.Context()); err == nil || !strings.Contains(err.Error(), "not canonical") {
			t.Fatalf("Head = %v; want not canonical", err)
		}
		data2, rev, _ := st.Load(t.Context(), HeadKey("g"))
		st.Swap(t.Context(), HeadKey("g"), []byte(strings.Replace(string(data2[1:]), `"by":`, `"digest":"","by":`, 1)), rev)
		if _, err := g.Head(t.Context()); err == nil {
			t.Fatal("Head accepted an empty optional field")
		}
	})
}

// tamper overwrites the file of key in the local store at dir.
func tamper(t *testing.T, dir, key, data string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(key)), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckName(t *testing.T) {
	for _, name := range []string{"a", "0", "customer-support-latest", "a.b_c-d", strings.Repeat("x", 63)} {
		if err := CheckName(name); err != nil {
			t.Errorf("CheckName(%q) = %v", name, err)
		}
	}
	st, _ := newLocal(t)
	for _, name := range []string{"", "A", "-a", ".a", "_a", "a/b", "..", "a b", "a\n", strings.Repeat("x", 64), "émile"} {
		if err := CheckName(name); err == nil {
			t.Errorf("CheckName(%q) accepted", name)
		}
		if _, err := Open(st, name); err == nil {
			t.Errorf("Open(%q) accepted", name)
		}
	}
}

// blobsOnly is a store without conditional writes.
type blobsOnly struct{ store.Blobs }

func TestOpenRefusesStoreWithoutSwap(t *testing.T) {
	st, _ := newLocal(t)
	_, err := Open(blobsOnly{st}, "g")
	if !errors.Is(err, store.ErrNotExclusive) || !strings.Contains(err.Error(), "conditional writes") {
		t.Fatalf("Open = %v; want ErrNotExclusive naming conditional writes", err)
	}
}

// noCondition is a store whose server does not do conditional writes.
type noCondition struct{ *localstore.Store }

func (noCondition) Swap(context.Context, string, []byte, string) error {
	return fmt.Errorf("the store does not support conditional writes (If-Match): the gate needs them: %w", store.ErrNotExclusive)
}

// TestUpdateNotExclusive: a store that cannot make the write conditional
// fails the commit at once, also with retry, and the head stays absent.
func TestUpdateNotExclusive(t *testing.T) {
	st, _ := newLocal(t)
	g := openGate(t, noCondition{st}, "g")
	calls := 0
	_, err := g.Update(t.Context(), true, func(cur *Record) (*Record, error) { calls++; return set(snap("a"))(cur) })
	if !errors.Is(err, store.ErrNotExclusive) || calls != 1 {
		t.Fatalf("Update = %v after %d calls; want ErrNotExclusive after 1", err, calls)
	}
	if _, err := g.Head(t.Context()); !errors.Is(err, ErrNoGate) {
		t.Fatalf("Head = %v; want ErrNoGate", err)
	}
}

func TestNames(t *testing.T) {
	st, _ := newLocal(t)
	ctx := context.Background()
	for _, name := range []string{"b", "a", "a.b"} {
		mustUpdate(t, openGate(t, st, name), fence(1))
	}
	st.Put(ctx, "gates/Bad/head", []byte("x"))
	st.Put(ctx, "gates/c/other", []byte("x"))
	got, err := Names(ctx, st)
	if err != nil || strings.Join(got, ",") != "a,a.b,b" {
		t.Fatalf("Names = %q, %v; want a, a.b, b", got, err)
	}
}
