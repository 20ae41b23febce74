package lru

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func size(b []byte) int64 { return int64(len(b)) }

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := New[string](10, size)
	c.Put("a", make([]byte, 4))
	c.Put("b", make([]byte, 4))
	if _, ok := c.Get("a"); !ok { // a is now the most recently used
		t.Fatal("a missing")
	}
	c.Put("c", make([]byte, 4)) // 12 > 10: b goes
	if c.Has("b") || !c.Has("a") || !c.Has("c") {
		t.Fatalf("after eviction: a %v b %v c %v; want a and c", c.Has("a"), c.Has("b"), c.Has("c"))
	}
	if c.Bytes() != 8 || c.Len() != 2 {
		t.Fatalf("bytes %d len %d, want 8, 2", c.Bytes(), c.Len())
	}
	// Replacing a value updates the byte count.
	c.Put("a", make([]byte, 1))
	if c.Bytes() != 5 {
		t.Fatalf("bytes %d after replacing a, want 5", c.Bytes())
	}
	c.Remove("c")
	if c.Has("c") || c.Bytes() != 1 || c.Len() != 1 {
		t.Fatalf("after Remove: has %v bytes %d len %d", c.Has("c"), c.Bytes(), c.Len())
	}
	c.Clear()
	if c.Len() != 0 || c.Bytes() != 0 || c.Has("a") {
		t.Fatal("Clear left entries")
	}
}

// A value larger than the budget is kept alone, and dropped by the next Put.
func TestCacheOversized(t *testing.T) {
	c := New[int](10, size)
	c.Put(1, make([]byte, 3))
	c.Put(2, make([]byte, 50))
	if c.Has(1) || !c.Has(2) || c.Bytes() != 50 {
		t.Fatalf("has 1 %v, has 2 %v, bytes %d; want only 2", c.Has(1), c.Has(2), c.Bytes())
	}
	c.Put(3, make([]byte, 1))
	if c.Has(2) || !c.Has(3) {
		t.Fatal("the oversized value outlived the next Put")
	}
}

// Has does not refresh an entry; Get does.
func TestCacheHasDoesNotRefresh(t *testing.T) {
	c := New[int](2, size)
	c.Put(1, []byte{1})
	c.Put(2, []byte{2})
	c.Has(1)
	c.Put(3, []byte{3})
	if c.Has(1) || !c.Has(2) {
		t.Fatal("Has marked the entry used")
	}
}

func TestCacheConcurrent(t *testing.T) {
	c := New[int](64, size)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				k := (g*1000 + i) % 100
				c.Put(k, make([]byte, k%7+1))
				c.Get(k + 1)
				if i%10 == 0 {
					c.Remove(k)
				}
			}
		})
	}
	wg.Wait()
	var sum int64
	for k := range 100 {
		if v, ok := c.Get(k); ok {
			sum += int64(len(v))
		}
	}
	if sum != c.Bytes() || sum > 64 {
		t.Fatalf("values hold %d bytes, Bytes says %d, budget 64", sum, c.Bytes())
	}
}

// Callers of a key while its call is in flight join it and get its
// result; fn runs once.
func TestGroupDoShares(t *testing.T) {
	var g Group[string, int]
	var runs atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	owner := make(chan int)
	go func() {
		v, err, joined := g.Do(context.Background(), "k", func() (int, error) {
			runs.Add(1)
			close(started)
			<-release
			return 42, nil
		})
		if err != nil || joined {
			t.Errorf("owner: %v, joined %v", err, joined)
		}
		owner <- v
	}()
	<-started
	var wg sync.WaitGroup
	results := make([]int, 9)
	for i := range results {
		c, own := g.Start("k") // while the call is in flight: joins
		if own {
			t.Fatal("Start during a call in flight started another")
		}
		wg.Go(func() { results[i], _ = c.Wait(context.Background()) })
	}
	close(release)
	wg.Wait()
	if v := <-owner; v != 42 {
		t.Fatalf("owner got %d", v)
	}
	for i, v := range results {
		if v != 42 {
			t.Fatalf("joiner %d got %d, want 42", i, v)
		}
	}
	if runs.Load() != 1 || g.Len() != 0 {
		t.Fatalf("fn ran %d times, %d calls left registered; want 1, 0", runs.Load(), g.Len())
	}
	if _, err, joined := g.Do(context.Background(), "k", func() (int, error) { return 0, errors.New("x") }); err == nil || joined {
		t.Fatalf("a Do after the call ended: %v, joined %v; want its own run", err, joined)
	}
}

// Start joins a call in flight but not one that has failed; Forget only
// removes the call it is given.
func TestGroupStart(t *testing.T) {
	var g Group[int, string]
	c1, own := g.Start(1)
	if !own {
		t.Fatal("first Start did not own the call")
	}
	if c, own := g.Start(1); own || c != c1 {
		t.Fatal("second Start did not join the call in flight")
	}
	c1.Set("", errors.New("boom"))
	c1.Set("late", nil) // only the first Set counts
	if _, err := c1.Wait(context.Background()); err == nil {
		t.Fatal("second Set overwrote the result")
	}
	c2, own := g.Start(1)
	if !own || c2 == c1 {
		t.Fatal("Start joined a failed call")
	}
	g.Forget(1, c1) // not c2's key any more: no effect
	if c, own := g.Start(1); own || c != c2 {
		t.Fatal("Forget of an old call removed the new one")
	}
	c2.Set("ok", nil)
	if c, own := g.Start(1); own || c != c2 {
		t.Fatal("Start did not join a finished, successful call before Forget")
	}
	g.Forget(1, c2)
	if g.Len() != 0 {
		t.Fatal("Forget left the call")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c3, _ := g.Start(2)
	if _, err := c3.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a canceled ctx: %v", err)
	}
	if f := Finished(7, fmt.Errorf("x")); !f.Failed() {
		t.Fatal("Finished with an error is not Failed")
	}
}
