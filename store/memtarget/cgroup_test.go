package memtarget

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cgroupFixture writes self (the process's cgroup file) and files (paths
// under a fake cgroup root, with their contents) and returns the paths of
// the self file and the root.
func cgroupFixture(t *testing.T, self string, files map[string]string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "cgroup")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, body := range files {
		f := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	selfFile := filepath.Join(dir, "self-cgroup")
	if self != "" {
		if err := os.WriteFile(selfFile, []byte(self), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return selfFile, root
}

const hybridSelf = `12:pids:/
4:memory:/kubepods/pod1/ctr
3:cpu,cpuacct:/kubepods/pod1/ctr
1:name=systemd:/kubepods/pod1/ctr
0::/kubepods/pod1/ctr
`

func TestFromCgroup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		self   string
		files  map[string]string
		limit  int64
		source string
		ok     bool
	}{
		{"v2 limit", "0::/kubepods/pod1/ctr\n",
			map[string]string{"kubepods/pod1/ctr/memory.max": "2147483648\n", "kubepods/pod1/memory.max": "4294967296\n"},
			2 << 30, SourceV2, true},
		{"v2 unlimited", "0::/user.slice/session-1.scope\n",
			map[string]string{"user.slice/session-1.scope/memory.max": "max\n"}, 0, SourceV2, false},
		{"v2 ancestors are not read", "0::/kubepods/pod1/ctr\n",
			map[string]string{"kubepods/pod1/ctr/memory.max": "max\n", "kubepods/memory.max": "68719476736\n"}, 0, SourceV2, false},
		{"v2 path missing: the root's file (a container's own cgroup)", "0::/kubepods/pod1/ctr\n",
			map[string]string{"memory.max": "1073741824\n"}, 1 << 30, SourceV2, true},
		{"v2 at the root: no memory.max", "0::/\n", map[string]string{"cgroup.controllers": "cpu memory\n"}, 0, SourceV2, false},
		{"v2 no memory controller in the cgroup", "0::/a\n", map[string]string{"a/cgroup.procs": "1\n"}, 0, SourceV2, false},
		{"v1 limit", "4:memory:/docker/abc\n2:cpu:/docker/abc\n",
			map[string]string{"memory/docker/abc/memory.limit_in_bytes": "536870912\n"}, 512 << 20, SourceV1, true},
		{"v1 unlimited", "4:memory:/docker/abc\n",
			map[string]string{"memory/docker/abc/memory.limit_in_bytes": "9223372036854771712\n"}, 0, SourceV1, false},
		{"v1 path missing: the root's file", "4:memory:/docker/abc\n",
			map[string]string{"memory/memory.limit_in_bytes": "805306368\n"}, 768 << 20, SourceV1, true},
		{"v1 controller in a joined line", "5:cpuacct,cpu,memory:/job\n",
			map[string]string{"memory/job/memory.limit_in_bytes": "1048576000\n"}, 1048576000, SourceV1, true},
		{"hybrid: the memory controller is v1's", hybridSelf,
			map[string]string{"memory/kubepods/pod1/ctr/memory.limit_in_bytes": "3221225472\n", "kubepods/pod1/ctr/memory.max": "1024\n"},
			3 << 30, SourceV1, true},
		{"no memory controller at all", "3:cpu:/x\n1:name=systemd:/x\n", nil, 0, "", false},
		{"empty cgroup file", "", nil, 0, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			self, root := cgroupFixture(t, tc.self, tc.files)
			if tc.self == "" {
				if err := os.WriteFile(self, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			limit, source, ok, err := FromCgroup(self, root)
			if err != nil {
				t.Fatalf("FromCgroup: %v", err)
			}
			if limit != tc.limit || source != tc.source || ok != tc.ok {
				t.Errorf("FromCgroup = %d, %q, %v; want %d, %q, %v", limit, source, ok, tc.limit, tc.source, tc.ok)
			}
		})
	}
}

func TestFromCgroupMissing(t *testing.T) {
	dir := t.TempDir()
	limit, source, ok, err := FromCgroup(filepath.Join(dir, "no-such-file"), dir)
	if err != nil || ok || limit != 0 || source != "" {
		t.Errorf("FromCgroup of a missing cgroup file = %d, %q, %v, %v; want no limit and no error", limit, source, ok, err)
	}
}

func TestFromCgroupGarbage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		self  string
		files map[string]string
		want  string
	}{
		{"v2 words", "0::/a\n", map[string]string{"a/memory.max": "lots\n"}, "memory.max"},
		{"v2 negative", "0::/a\n", map[string]string{"a/memory.max": "-5\n"}, "memory.max"},
		{"v2 empty", "0::/a\n", map[string]string{"a/memory.max": ""}, "memory.max"},
		{"v1 words", "4:memory:/a\n", map[string]string{"memory/a/memory.limit_in_bytes": "unlimited\n"}, "memory.limit_in_bytes"},
		{"v1 negative", "4:memory:/a\n", map[string]string{"memory/a/memory.limit_in_bytes": "-1\n"}, "memory.limit_in_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			self, root := cgroupFixture(t, tc.self, tc.files)
			limit, _, ok, err := FromCgroup(self, root)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("FromCgroup = %d, %v, %v; want an error naming %s", limit, ok, err, tc.want)
			}
			if ok {
				t.Errorf("FromCgroup reports a limit (%d) with its error", limit)
			}
		})
	}
}

// TestFromCgroupGarbageSelfLines: lines of the cgroup file that are not
// "id:controllers:path" are skipped, not taken for a cgroup.
func TestFromCgroupGarbageSelfLines(t *testing.T) {
	self, root := cgroupFixture(t, "garbage\nmemory\n:\n0::/a\n", map[string]string{"a/memory.max": "1048576\n"})
	limit, source, ok, err := FromCgroup(self, root)
	if err != nil || !ok || limit != 1<<20 || source != SourceV2 {
		t.Errorf("FromCgroup = %d, %q, %v, %v; want the v2 line's 1 MiB", limit, source, ok, err)
	}
}
