package gate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/storetest"
)

// deleter removes a key from a store, as a store writer (or an S3 delete
// marker) can.
type deleter func(t *testing.T, key string)

// TestHeadDeletedNotRecreated: with the head of a gate that has history
// deleted, the next commit does not create the gate again at generation 1
// (which would drop its fences); it refuses, naming the records.
func TestHeadDeletedNotRecreated(t *testing.T) {
	st, dir := newLocal(t)
	headDeleted(t, st, func(t *testing.T, key string) {
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(key))); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHeadDeletedNotRecreatedS3: the same on versitygw, where the head is
// deleted with DeleteObject (a delete marker in a versioned bucket).
func TestHeadDeletedNotRecreatedS3(t *testing.T) {
	srv, st := newS3(t)
	headDeleted(t, st, func(t *testing.T, key string) {
		_, err := srv.Client(t).DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String("gates"), Key: aws.String("pinfs/" + key)})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func headDeleted(t *testing.T, st Store, del deleter) {
	t.Helper()
	g := openGate(t, st, "g")
	mustUpdate(t, g, set(snap("a")))
	mustUpdate(t, g, fence(7))
	del(t, HeadKey("g"))
	_, err := g.Update(t.Context(), true, set(snap("b")))
	if err == nil || !strings.Contains(err.Error(), "holds 2 records") || !strings.Contains(err.Error(), "refusing to create the gate again") {
		t.Fatalf("Update over a deleted head = %v; want a refusal naming the records", err)
	}
	if _, err := g.Head(t.Context()); errors.Is(err, ErrNoGate) || !strings.Contains(err.Error(), "the head was deleted") {
		t.Fatalf("Head over a deleted head = %v; want a refusal, not ErrNoGate", err)
	}
	if _, _, err := st.Load(t.Context(), HeadKey("g")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused commit wrote a head: %v", err)
	}
}

// TestHeadNeedsItsChain: Head, and a commit on top of it, refuse a head
// whose history does not reach generation 1 (a record removed from
// records/), and the commit writes nothing.
func TestHeadNeedsItsChain(t *testing.T) {
	st, dir := newLocal(t)
	g := openGate(t, st, "g")
	r1 := mustUpdate(t, g, fence(1))
	mustUpdate(t, g, set(snap("a")))
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(RecordKey("g", r1.RecordDigest())))); err != nil {
		t.Fatal(err)
	}
	checked = &checkedSet{} // a new process: this one has checked the chain before
	if _, err := g.Head(t.Context()); err == nil || !strings.Contains(err.Error(), "generation 1") || !strings.Contains(err.Error(), "gap") {
		t.Fatalf("Head = %v; want a gap at generation 1", err)
	}
	before, _ := st.Get(t.Context(), HeadKey("g"))
	if _, err := g.Update(t.Context(), true, set(snap("b"))); err == nil || !strings.Contains(err.Error(), "gap") {
		t.Fatalf("Update = %v; want a gap at generation 1", err)
	}
	if after, _ := st.Get(t.Context(), HeadKey("g")); string(after) != string(before) {
		t.Fatal("a refused commit changed the head")
	}
}

// TestConcurrentCreate: of writers that create one gate at once, exactly
// one wins and the others lose their swap (ErrConflict), though they may
// list the winner's record: none is refused as a gate with history.
func TestConcurrentCreate(t *testing.T) {
	st, _ := newLocal(t)
	const writers = 6
	for round := range 10 {
		name := fmt.Sprintf("g%d", round)
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				g := openGate(t, st, name)
				_, errs[i] = g.Update(t.Context(), false, func(cur *Record) (*Record, error) {
					if err := g.Expect(cur, 0); err != nil { // a create, not a commit after the winner's
						return nil, err
					}
					return set(snap(fmt.Sprint(i)))(cur)
				})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil && !errors.Is(err, store.ErrConflict) {
				t.Fatalf("round %d writer %d: %v; want nil or ErrConflict", round, i, err)
			}
		}
		storetest.OneWinner(t, name, errs)
	}
}

// TestHeadRolledBack: a head set back to an older record of its own
// history (its chain still reaches generation 1) is refused by Head, Log
// and Update, in this process and in a new one, naming the generation
// records/ holds, and the refused commit writes nothing; so is a head
// beside a record under records/ that is not a gate record (which could
// hide a newer one).
func TestHeadRolledBack(t *testing.T) {
	st, dir := newLocal(t)
	rolledBack(t, st, func(t *testing.T, key string, b []byte) { tamper(t, dir, key, string(b)) })
}

// TestHeadRolledBackS3: the same on versitygw, where the head is
// overwritten with a plain PutObject.
func TestHeadRolledBackS3(t *testing.T) {
	srv, st := newS3(t)
	rolledBack(t, st, func(t *testing.T, key string, b []byte) { srv.Put(t, "gates", "pinfs/"+key, b) })
}

func rolledBack(t *testing.T, st Store, overwrite func(t *testing.T, key string, b []byte)) {
	t.Helper()
	ctx := t.Context()
	g := openGate(t, st, "prod")
	r1 := mustUpdate(t, g, set(snap("a")))
	mustUpdate(t, g, fence(5))
	mustUpdate(t, g, fence(7))
	old, err := st.Get(ctx, RecordKey("prod", r1.RecordDigest()))
	if err != nil {
		t.Fatal(err)
	}
	overwrite(t, HeadKey("prod"), old)
	const want = "gate prod: head is at generation 1 but records/ holds generation 3"
	for _, process := range []string{"this process", "a new process"} {
		if process == "a new process" {
			checked, generations = &checkedSet{}, &checkedSet{}
		}
		if r, err := g.Head(ctx); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "rolled back") {
			t.Fatalf("%s: Head of a rolled back gate = %+v, %v; want %q", process, r, err, want)
		}
		if _, err := g.Log(ctx); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: Log of a rolled back gate = %v; want %q", process, err, want)
		}
		if _, err := g.Update(ctx, true, fence(8)); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: Update of a rolled back gate = %v; want %q", process, err, want)
		}
		if b, _, err := st.Load(ctx, HeadKey("prod")); err != nil || string(b) != string(old) {
			t.Fatalf("%s: a refused commit changed the head: %v", process, err)
		}
	}

	h := openGate(t, st, "other")
	mustUpdate(t, h, fence(1))
	overwrite(t, RecordKey("other", snap("junk")), []byte("junk"))
	if _, err := h.Head(ctx); err == nil || !strings.Contains(err.Error(), "records/ holds what is not a record of this gate") {
		t.Fatalf("Head beside a junk record = %v; want a refusal", err)
	}
}

// failingPuts is a store that refuses every Put, as a reader's read-only
// credentials do.
type failingPuts struct{ Store }

func (failingPuts) Put(context.Context, string, []byte) error { return errors.New("access denied") }

// TestCrashBetweenHeadAndRecord: a commit that stopped after its head
// write, before storing its record, leaves a head that a reader without
// write access still accepts, that a reader with it stores under
// records/, and on which the next commit builds with no gap.
func TestCrashBetweenHeadAndRecord(t *testing.T) {
	st, dir := newLocal(t)
	g := openGate(t, st, "g")
	mustUpdate(t, g, fence(1))
	r2 := mustUpdate(t, g, fence(2))
	key := RecordKey("g", r2.RecordDigest())
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(key))); err != nil {
		t.Fatal(err)
	}
	checked, generations = &checkedSet{}, &checkedSet{}
	if r, err := openGate(t, failingPuts{st}, "g").Head(t.Context()); err != nil || r.Generation != 2 {
		t.Fatalf("Head through a store that cannot store the record = %+v, %v; want generation 2", r, err)
	}
	if _, err := openGate(t, failingPuts{st}, "g").Update(t.Context(), false, fence(3)); err == nil || !strings.Contains(err.Error(), "access denied") {
		t.Fatalf("Update that cannot store the head's record = %v; want a refusal before it commits", err)
	}
	mustUpdate(t, g, fence(3))
	if _, err := st.Get(t.Context(), key); err != nil {
		t.Fatalf("the commit did not store its predecessor's record: %v", err)
	}
	checked = &checkedSet{}
	if log, err := g.Log(t.Context()); err != nil || len(log) != 3 {
		t.Fatalf("Log = %d records, %v; want 3", len(log), err)
	}
}
