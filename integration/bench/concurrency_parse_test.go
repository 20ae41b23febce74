package bench

import "testing"

func TestGCCycles(t *testing.T) {
	log := "time=x level=INFO msg=serving\n" +
		"gc 1 @0.010s 1%: 0.01+0.2+0.01 ms clock, 0.02+0/0.1/0+0.02 ms cpu, 3->3->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"gc 2 @0.020s 1%: ...\n" +
		"a line that mentions gc 99 @ in the middle\n" +
		"gc 17 @5.1s 3%: 0.01+0.2+0.01 ms clock (forced)\n" +
		"time=y level=INFO msg=done\n"
	if got := gcCycles(log); got != 17 {
		t.Errorf("gcCycles = %d, want 17 (the last collection's number)", got)
	}
	if got := gcCycles("time=x msg=serving\n"); got != 0 {
		t.Errorf("gcCycles of a log without gctrace = %d, want 0", got)
	}
}

func TestMemoryBound(t *testing.T) {
	limit := `time=2026-01-01T00:00:00Z level=INFO msg="memory limit" bytes=639180216 snapshot_heap=123 cache_mem=268435456` + "\n"
	// The line of issue 38's --memory-target, as its mount logs it.
	target := `time=2026-12-08T01:28:33.956Z level=INFO msg=memory digest=sha256:09cfa3b670d5840d22e138c9e0db1a13f131dee14c270c4565368aa3e15f7c31 ` +
		`run_id=20261208T012833Z-f941541c target=1073741824 source=flag pool=903872512 mem=523239424 readahead=268435456 reserve=112197632 heap=168901336` + "\n"
	cases := []struct {
		name, log string
		want      int64
		ok        bool
	}{
		{"today's limit line", "x\n" + limit, 639180216, true},
		{"the target line wins", limit + target, 1 << 30, true},
		{"the target line wins over a later limit line", target + limit, 1 << 30, true},
		{"json target", `{"time":"t","level":"INFO","msg":"memory","target":2147483648,"pool":1}` + "\n", 2 << 30, true},
		{"json limit", `{"level":"INFO","msg":"memory limit","bytes":5000}` + "\n", 5000, true},
		{"a memory line without target", "level=INFO msg=memory pool=5\n", 0, false},
		{"another message's target", "level=INFO msg=other target=7\n", 0, false},
		{"no line", "level=INFO msg=serving\n", 0, false},
	}
	for _, c := range cases {
		got, ok := memoryBound(c.log)
		if ok != c.ok || got.bytes != c.want {
			t.Errorf("%s: memoryBound = %d, %v; want %d, %v", c.name, got.bytes, ok, c.want, c.ok)
		}
	}
}
