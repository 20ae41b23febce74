package pool

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func newPool(t *testing.T, slots int) *Pool {
	t.Helper()
	p, err := New(int64(slots) * SlotSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// mustPanic runs f and fails unless it panics with a message containing
// want.
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic; want one about %q", want)
		}
		if s, _ := r.(string); !strings.Contains(s, want) {
			t.Fatalf("panic %v; want one about %q", r, want)
		}
	}()
	f()
}

func TestSlotsRecycledByLastRelease(t *testing.T) {
	p := newPool(t, 2)
	ctx := context.Background()
	a, err := p.Get(ctx, SlotSize, Flight)
	if err != nil {
		t.Fatal(err)
	}
	a.Retain(Memory).Retain(Reader)
	if st := p.Stats(); st.Free != 1 || st.InUse["flight"] != 1 || st.InUse["memory"] != 1 || st.InUse["reader"] != 1 {
		t.Fatalf("stats after Get and two Retains: %+v", st)
	}
	a.Release(Flight)
	a.Release(Memory)
	if p.Stats().Free != 1 {
		t.Fatal("a slot still held by a reader went back to the pool")
	}
	a.Release(Reader)
	if st := p.Stats(); st.Free != 2 {
		t.Fatalf("last release: %d free, want 2", st.Free)
	}
	// The slot freed last is the one reused: its pages are mapped.
	b, _ := p.Get(ctx, SlotSize, Flight)
	if &b.buf[0] != &a.buf[0] {
		t.Fatal("Get did not reuse the slot released last")
	}
	b.Release(Flight)
}

func TestReleaseRulesPanic(t *testing.T) {
	p := newPool(t, 1)
	b, _ := p.Get(context.Background(), SlotSize, Flight)
	mustPanic(t, "holds no reference", func() { b.Release(Memory) }) // another holder's reference
	b.Retain(Reader)
	b.Release(Reader)
	mustPanic(t, "holds no reference", func() { b.Release(Reader) }) // twice
	b.Release(Flight)
	mustPanic(t, "released block", func() { b.Bytes() })
	mustPanic(t, "released block", func() { b.Retain(Memory) })
	if b.TryRetain(Memory) {
		t.Fatal("TryRetain of a released block succeeded")
	}
	mustPanic(t, "holds no reference", func() { b.Release(Flight) })
	mustPanic(t, "holds no reference", func() { b.Move(Flight, Call) })
}

// A stale handle stays dead even once its slot is reused: TryRetain
// refuses it and its bytes panic, while the new Block is served.
func TestStaleHandleNeverSeesTheNextLoad(t *testing.T) {
	p := newPool(t, 1)
	ctx := context.Background()
	old, _ := p.Get(ctx, SlotSize, Flight)
	old.Release(Flight)
	fresh, _ := p.Get(ctx, SlotSize, Flight)
	if old.TryRetain(Reader) {
		t.Fatal("a released handle was retained after its slot was reused")
	}
	mustPanic(t, "released block", func() { old.Bytes() })
	fresh.Bytes()[0] = 1
	fresh.Release(Flight)
}

func TestGetWaitsForASlot(t *testing.T) {
	p := newPool(t, 1)
	a, _ := p.Get(context.Background(), SlotSize, Flight)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := p.Get(ctx, SlotSize, Flight); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get on a full pool: %v, want the context's deadline", err)
	}
	if _, ok := p.TryGet(SlotSize, Flight); ok {
		t.Fatal("TryGet on a full pool succeeded")
	}
	got := make(chan *Block)
	go func() {
		b, err := p.Get(context.Background(), SlotSize, Readahead)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	time.Sleep(10 * time.Millisecond) // let it wait (not a timing assertion: either order passes)
	a.Release(Flight)
	select {
	case b := <-got:
		b.Release(Readahead)
	case <-time.After(10 * time.Second):
		t.Fatal("Get still waiting after a slot was freed")
	}
	st := p.Stats()
	if st.Timeouts != 1 || st.Waits < 2 {
		t.Fatalf("stats %+v: want 1 timeout and 2 waits", st)
	}
}

func TestSmallBlocksOnTheHeap(t *testing.T) {
	p := newPool(t, 1)
	b, err := p.Get(context.Background(), 100, Flight)
	if err != nil || b.Slotted() || b.Len() != 100 {
		t.Fatalf("Get(100): %v slotted=%v len=%d", err, b.Slotted(), b.Len())
	}
	if p.Stats().Free != 1 {
		t.Fatal("a small block took a slot")
	}
	b.Release(Flight)
	mustPanic(t, "released block", func() { b.Bytes() })
	for _, n := range []int{0, -1, SlotSize + 1} {
		if _, err := p.Get(context.Background(), n, Flight); err == nil {
			t.Errorf("Get(%d) accepted", n)
		}
	}
}

func TestCloseWithSlotsHeld(t *testing.T) {
	p, err := New(2 * SlotSize)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := p.Get(context.Background(), SlotSize, Flight)
	if err := p.Close(); err == nil {
		t.Fatal("Close with a slot held unmapped the pool")
	}
	b.Bytes()[0] = 7 // still mapped: no fault
	b.Release(Flight)
	if _, err := p.Get(context.Background(), SlotSize, Flight); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
}

// Many goroutines sharing blocks: with -race, and the counts come out
// even.
func TestConcurrentHolders(t *testing.T) {
	p := newPool(t, 4)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				b, err := p.Get(context.Background(), SlotSize, Flight)
				if err != nil {
					t.Error(err)
					return
				}
				b.Bytes()[i] = byte(g)
				b.Retain(Reader)
				b.Move(Flight, Call)
				if b.TryRetain(Memory) {
					b.Release(Memory)
				}
				b.Release(Call)
				b.Release(Reader)
			}
		}()
	}
	wg.Wait()
	st := p.Stats()
	if st.Free != 4 {
		t.Fatalf("%d of 4 slots free after every holder released", st.Free)
	}
	for h, n := range st.InUse {
		if n != 0 {
			t.Errorf("holder %s: %d references after every release", h, n)
		}
	}
}

// A Get that finds no free slot asks the OnShort functions for one
// before it waits: a holder that gives one back lets it through without
// anyone else releasing.
func TestOnShortGivesBack(t *testing.T) {
	p := newPool(t, 1)
	held, _ := p.Get(context.Background(), SlotSize, Memory)
	var asked int
	p.OnShort(func() {
		asked++
		if held != nil {
			held.Release(Memory)
			held = nil
		}
	})
	if p.Short() {
		t.Fatal("Short with no Get waiting")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := p.Get(ctx, SlotSize, Flight)
	if err != nil {
		t.Fatalf("Get with a holder that gives its slot back: %v", err)
	}
	if asked != 1 {
		t.Fatalf("OnShort called %d times, want 1", asked)
	}
	b.Release(Flight)
}
