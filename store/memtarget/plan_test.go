package memtarget

import (
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store/blocks"
)

func TestPlan(t *testing.T) {
	const heap = 120 << 20
	v2 := func(max string) (string, map[string]string) {
		return "0::/pod/ctr\n", map[string]string{"pod/ctr/memory.max": max}
	}
	v1 := func(limit string) (string, map[string]string) {
		return "4:memory:/pod/ctr\n", map[string]string{"memory/pod/ctr/memory.limit_in_bytes": limit}
	}
	split := func(target int64) Sizes {
		s, err := Split(target, heap)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	def := Request{Heap: heap, Mem: 256 << 20, Readahead: blocks.DefaultReadaheadBudget}
	defPool := int64(256<<20 + blocks.DefaultReadaheadBudget + blocks.PoolReserve)
	for _, tc := range []struct {
		name   string
		r      Request
		cgroup func(string) (string, map[string]string)
		value  string
		want   Sizes
	}{
		{"no cgroup: the old defaults", def, v2, "max\n",
			Sizes{Target: heap + defPool, Source: "default", Heap: heap, Pool: defPool, Mem: 256 << 20,
				Readahead: blocks.DefaultReadaheadBudget, Reserve: blocks.PoolReserve}},
		{"v2 limit: 80 %", def, v2, "2147483648\n",
			with(split(2<<30/100*CgroupShare), SourceV2, 2<<30)},
		{"v1 limit: 80 %", def, v1, "1073741824\n",
			with(split(1<<30/100*CgroupShare), SourceV1, 1<<30)},
		{"NoCgroup: the defaults whatever the cgroup", Request{Heap: heap, Mem: 256 << 20, Readahead: blocks.DefaultReadaheadBudget, NoCgroup: true},
			v2, "2147483648\n",
			Sizes{Target: heap + defPool, Source: "default", Heap: heap, Pool: defPool, Mem: 256 << 20,
				Readahead: blocks.DefaultReadaheadBudget, Reserve: blocks.PoolReserve}},
		{"v1 unlimited: the defaults", def, v1, "9223372036854771712\n",
			Sizes{Target: heap + defPool, Source: "default", Heap: heap, Pool: defPool, Mem: 256 << 20,
				Readahead: blocks.DefaultReadaheadBudget, Reserve: blocks.PoolReserve}},
		{"the flag wins over the cgroup", Request{Target: 1 << 30, Heap: heap, Mem: 256 << 20, Readahead: blocks.DefaultReadaheadBudget},
			v2, "4294967296\n", with(split(1<<30), "flag", 0)},
		{"cache-mem given wins for its part", Request{Heap: heap, Mem: 64 << 20, MemSet: true, Readahead: blocks.DefaultReadaheadBudget},
			v2, "2147483648\n", with(split(2<<30/100*CgroupShare), SourceV2, 2<<30).Override(64<<20, true, 0, false)},
		{"readahead-budget given wins for its part", Request{Target: 1 << 30, Heap: heap, Mem: 256 << 20, Readahead: 8 << 20, ReadaheadSet: true},
			v2, "max\n", with(split(1<<30), "flag", 0).Override(0, false, 8<<20, true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			self, files := tc.cgroup(tc.value)
			tc.r.Self, tc.r.Root = cgroupFixture(t, self, files)
			got, err := Plan(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Plan = %+v\nwant   %+v", got, tc.want)
			}
			checkShares(t, got)
		})
	}
}

func with(s Sizes, source string, limit int64) Sizes {
	s.Source, s.Limit = source, limit
	return s
}

// TestPlanCgroupTooSmall: a cgroup whose 80 % leaves too little beside
// the heap is refused, naming the limit and the way out.
func TestPlanCgroupTooSmall(t *testing.T) {
	self, root := cgroupFixture(t, "0::/c\n", map[string]string{"c/memory.max": "157286400\n"}) // 150 MiB
	_, err := Plan(Request{Heap: 120 << 20, Mem: 1, Readahead: 1 << 20, Self: self, Root: root})
	if err == nil || !strings.Contains(err.Error(), SourceV2+" 150MiB") || !strings.Contains(err.Error(), "--memory-target") {
		t.Fatalf("Plan under a 150 MiB cgroup: %v; want a refusal naming the limit and --memory-target", err)
	}
	_, err = Plan(Request{Target: 100 << 20, Heap: 120 << 20, Readahead: 1 << 20, Self: self, Root: root})
	if err == nil || !strings.HasPrefix(err.Error(), "--memory-target") {
		t.Fatalf("Plan of a 100 MiB target: %v; want a refusal of --memory-target", err)
	}
}

// TestPlanCgroupUnread: a cgroup file that cannot be read leaves the
// default target, and says why.
func TestPlanCgroupUnread(t *testing.T) {
	self, root := cgroupFixture(t, "0::/c\n", map[string]string{"c/memory.max": "garbage\n"})
	s, err := Plan(Request{Heap: 10 << 20, Mem: 0, Readahead: 1 << 20, Self: self, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if s.Source != "default" || s.Unread == nil || !strings.Contains(s.Unread.Error(), "memory.max") {
		t.Errorf("Plan = %+v; want the default target and why the cgroup was not read", s)
	}
	if s.Pool != 1<<20+blocks.PoolReserve {
		t.Errorf("pool %d; want readahead + reserve", s.Pool)
	}
}
