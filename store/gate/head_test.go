package gate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
	defer func(s time.Duration) { settle = s }(settle)
	settle = 100 * time.Millisecond
	g := openGate(t, st, "g")
	mustUpdate(t, g, set(snap("a")))
	mustUpdate(t, g, fence(7))
	del(t, HeadKey("g"))
	_, err := g.Update(t.Context(), true, set(snap("b")))
	if err == nil || !strings.Contains(err.Error(), "holds 2 records") || !strings.Contains(err.Error(), "refusing to create the gate again") {
		t.Fatalf("Update over a deleted head = %v; want a refusal naming the records", err)
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
// see the winner's record before its head: none is refused as a gate
// with history.
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
