package cache

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store/pool"
	"github.com/pinfs/pinfs/store/pool/pooltest"
	"github.com/pinfs/pinfs/verify/b3"
)

func key(i int, idx int64) Key {
	return Key{Digest: b3.Of([]byte(fmt.Sprint(i))), Index: idx}
}

func block(k Key, n int) []byte {
	return bytes.Repeat([]byte(k.String()[:8]), n/8+1)[:n]
}

// memPut puts block(k, n) into m from a pool block, and releases the
// caller's reference.
func memPut(t *testing.T, p *pool.Pool, m *Mem, k Key, n int) {
	t.Helper()
	b, err := p.Get(context.Background(), n, pool.Flight)
	if err != nil {
		t.Fatal(err)
	}
	copy(b.Bytes(), block(k, n))
	m.Put(k, b)
	b.Release(pool.Flight)
}

// get returns k's bytes from m, copied, releasing the reference Get took.
func get(m *Mem, k Key) ([]byte, bool) {
	b, ok := m.Get(k, pool.Reader)
	if !ok {
		return nil, false
	}
	defer b.Release(pool.Reader)
	return bytes.Clone(b.Bytes()), true
}

func TestKeyName(t *testing.T) {
	// The earlier layout's block file names, which a listing removes.
	k := key(1, 42)
	if !isOldName(k.String()) {
		t.Fatalf("isOldName(%q) = false", k.String())
	}
	for _, bad := range []string{"", "x-1", k.Digest.Hex(), k.Digest.Hex() + partSuffix, k.Digest.Hex() + "-", k.Digest.Hex() + "-01",
		k.Digest.Hex() + "--1", strings.ToUpper(k.Digest.Hex()) + "-1", k.Digest.Hex()[:63] + "-1"} {
		if isOldName(bad) {
			t.Errorf("isOldName(%q) accepted", bad)
		}
	}
	if key(1, 0).bytes() == key(1, 1).bytes() || key(1, 0).bytes() == key(2, 0).bytes() {
		t.Fatal("distinct keys share a memory key")
	}
}

func TestMem(t *testing.T) {
	p := pooltest.New(t, 1)
	m, err := NewMem(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	k := key(1, 0)
	if _, ok := get(m, k); ok {
		t.Fatal("hit in an empty cache")
	}
	memPut(t, p, m, k, 1000)
	m.Wait()
	b, ok := get(m, k)
	if !ok || !bytes.Equal(b, block(k, 1000)) {
		t.Fatalf("Get after Put: %v", ok)
	}
	if _, ok := get(m, key(1, 1)); ok {
		t.Fatal("hit for another index")
	}
	st := m.Stats()
	if st.Hits != 1 || st.Misses != 2 || st.Bytes != 1000 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := NewMem(0); err == nil {
		t.Fatal("NewMem(0) accepted")
	}
}

func TestMemBudget(t *testing.T) {
	p := pooltest.New(t, 40)
	m, err := NewMem(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := range 40 {
		k := key(i, 0)
		memPut(t, p, m, k, 256<<10)
		m.Wait()
	}
	if st := m.Stats(); st.Bytes > 4<<20 || st.Bytes <= 0 {
		t.Fatalf("memory tier holds %d bytes, budget %d", st.Bytes, 4<<20)
	}
	// What the tier let go went back to the pool: it holds at most its
	// budget's worth of slots.
	if st := p.Stats(); st.Slots-st.Free > 4 {
		t.Fatalf("%d slots held by a tier of 4 MiB: %v", st.Slots-st.Free, st.InUse)
	}
}

// The front admits every block at once, before ristretto's buffer and
// policy have taken it, keeps the latest within its budget, and works
// alone when ristretto has no budget.
func TestMemFront(t *testing.T) {
	p := pooltest.New(t, 16)
	m, err := NewMem(1<<20, WithFront(3<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.FrontLimit() != 3<<20 {
		t.Fatalf("FrontLimit %d", m.FrontLimit())
	}
	for i := range 5 {
		k := key(i, 0)
		memPut(t, p, m, k, 1<<20)
		// No Wait: visible at once, whatever ristretto does with it.
		if b, ok := get(m, k); !ok || !bytes.Equal(b, block(k, 1<<20)) {
			t.Fatalf("block %d not found right after Put", i)
		}
		if !m.Has(k) {
			t.Fatalf("Has(%d) false right after Put", i)
		}
	}
	if st := m.Stats(); st.FrontBytes != 3<<20 {
		t.Fatalf("front holds %d bytes, want its budget %d", st.FrontBytes, 3<<20)
	}
	hits := m.Stats().Hits
	m.Has(key(4, 0))
	m.Has(key(99, 0))
	if st := m.Stats(); st.Hits != hits || st.Misses != 0 {
		t.Fatalf("Has counted: %+v", st)
	}

	front, err := NewMem(0, WithFront(2<<20))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		k := key(i, 0)
		memPut(t, p, front, k, 1<<20)
	}
	if _, ok := get(front, key(0, 0)); ok {
		t.Fatal("front-only tier kept a block beyond its budget")
	}
	if _, ok := get(front, key(2, 0)); !ok {
		t.Fatal("front-only tier lost the latest block")
	}
	front.Wait() // no ristretto: returns at once
	front.Close()
	if _, ok := get(front, key(2, 0)); ok {
		t.Fatal("hit after Close")
	}
	memPut(t, p, front, key(3, 0), 10)
	if front.Has(key(3, 0)) {
		t.Fatal("Put after Close kept the block")
	}
}
