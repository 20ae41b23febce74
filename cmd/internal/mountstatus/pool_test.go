package mountstatus

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store/pool"
)

type fakePool struct{ st pool.Stats }

func (f *fakePool) Stats() pool.Stats { return f.st }

func TestSourcePool(t *testing.T) {
	src := testSource(time.Now())
	if st := src.Status(); st.Pool != nil {
		t.Errorf("status without a pool source has pool %+v", st.Pool)
	}
	if PoolOf(nil) != nil {
		t.Error("PoolOf(nil) is not nil")
	}
	f := &fakePool{st: pool.Stats{Slots: 160, Free: 100, SlotSize: pool.SlotSize,
		InUse: map[string]int64{"memory": 40, "readahead": 18, "reader": 3, "flight": 0, "zeta": 2, "alpha": 1},
		Gets:  1000, Waits: 7, Timeouts: 2, WaitTime: 1500 * time.Millisecond}}
	src.Pool = poolOf(f)
	st := src.Status()
	want := Pool{Slots: 160, Free: 100, SlotBytes: pool.SlotSize, InUse: f.st.InUse, Waits: 7, WaitSeconds: 1.5, Timeouts: 2}
	if st.Pool == nil || st.Pool.Slots != want.Slots || st.Pool.Free != want.Free || st.Pool.SlotBytes != want.SlotBytes ||
		st.Pool.Waits != want.Waits || st.Pool.WaitSeconds != want.WaitSeconds || st.Pool.Timeouts != want.Timeouts ||
		st.Pool.InUse["memory"] != 40 || len(st.Pool.InUse) != len(want.InUse) {
		t.Fatalf("pool %+v, want %+v", st.Pool, want)
	}

	var text bytes.Buffer
	if err := st.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	line := "  pool: 100 of 160 slots free (1 MiB each); in use: memory 40, readahead 18, reader 3, alpha 1, zeta 2; waits 7 (1.500 s), timeouts 2\n"
	if !strings.Contains(text.String(), line) {
		t.Errorf("text status lacks\n%q\ngot\n%s", line, text.String())
	}

	// The JSON names the fields scripts read.
	var got map[string]any
	if err := json.Unmarshal(src.JSON(), &got); err != nil {
		t.Fatal(err)
	}
	p, _ := got["pool"].(map[string]any)
	for k, v := range map[string]float64{"slots": 160, "free": 100, "slot_bytes": pool.SlotSize, "waits": 7, "wait_seconds": 1.5, "timeouts": 2} {
		if p[k] != v {
			t.Errorf("JSON pool.%s = %v, want %v (pool %v)", k, p[k], v, p)
		}
	}
	if in, _ := p["in_use"].(map[string]any); in["readahead"] != float64(18) {
		t.Errorf("JSON pool.in_use = %v, want readahead 18", p["in_use"])
	}
}

// TestPoolOfRealPool reads a real pool: a slot held by the memory tier and
// a reply, and a Get that timed out waiting for a free one.
func TestPoolOfRealPool(t *testing.T) {
	p, err := pool.New(pool.SlotSize)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Get(t.Context(), pool.SlotSize, pool.Memory)
	if err != nil {
		t.Fatal(err)
	}
	b.Retain(pool.Reader)
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	if _, err := p.Get(ctx, pool.SlotSize, pool.Flight); err == nil {
		t.Fatal("a Get from a pool with no free slot did not wait and fail")
	}
	got := PoolOf(p)()
	if got.Slots != 1 || got.Free != 0 || got.InUse["memory"] != 1 || got.InUse["reader"] != 1 || got.Waits != 1 || got.Timeouts != 1 || got.WaitSeconds <= 0 {
		t.Errorf("pool %+v; want 1 slot, none free, memory 1, reader 1, one wait that timed out", got)
	}
	b.Release(pool.Reader)
	b.Release(pool.Memory)
	if got := PoolOf(p)(); got.Free != 1 || got.InUse["memory"] != 0 {
		t.Errorf("pool after the releases %+v; want its slot free", got)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
