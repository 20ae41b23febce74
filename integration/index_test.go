package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestIndexDifferential is issue 26's differential test: a snapshot
// served from the heap (a cache dir that cannot hold the index) and from
// a mapped index (a good cache dir, second mount) looks the same to find,
// ls -la, getfattr, read, pinfs ls and pinfs run show --members; the
// first says once that it serves from memory, the second not at all.
func TestIndexDifferential(t *testing.T) {
	t.Parallel()
	f := s3IndexFixture(t, indexSource(t, manyFiles))

	// The heap mount and the mount that builds the index run at once.
	heap, cache := noRoomCache(t), filepath.Join(f.work, "cache")
	dir, d := f.mount(t, heap, filepath.Join(f.work, "heap.jsonl"), "--run-id", "heap")
	_, build := f.mount(t, cache, filepath.Join(f.work, "build.jsonl"))
	indexOf(t, cache)
	heapView := indexView(t, dir, f.data)
	build.stop(t, 30*time.Second)
	d.stop(t, 30*time.Second)
	wantLogged(t, d, indexNoRoom, 1)
	wantLogged(t, d, indexIndexed, 0)
	if fi, err := os.Stat(filepath.Join(heap, indexEntryDir)); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("meta/index of the heap cache: %v, %v", fi, err)
	}
	wantLogged(t, build, indexIndexed, 1)
	wantLogged(t, build, indexNoRoom, 0)

	dir, d = f.mount(t, cache, filepath.Join(f.work, "mapped.jsonl"), "--run-id", "mapped")
	mappedView := indexView(t, dir, f.data)
	d.stop(t, 30*time.Second)
	for _, msg := range []string{indexIndexed, indexNoRoom, indexNotUsed, indexFailed} {
		wantLogged(t, d, msg, 0) // it mapped the index as it was
	}
	sameView(t, "mapped index vs heap table", mappedView, heapView)
	sameView(t, "pinfs ls from the index vs from the table", lsView(t, f, cache), lsView(t, f, heap))

	heapRun := runShowMembers(t, f, heap, filepath.Join(f.work, "heap.jsonl"), "heap")
	mappedRun := runShowMembers(t, f, cache, filepath.Join(f.work, "mapped.jsonl"), "mapped")
	sameView(t, "run show --members from the index vs from the table", mappedRun, heapRun)
	var ms []json.RawMessage
	if err := json.Unmarshal([]byte(heapRun["members"]), &ms); err != nil || len(ms) != len(viewFiles) {
		t.Errorf("run show lists %d members (%v), the run read %d", len(ms), err, len(viewFiles))
	}
}

// lsView is pinfs ls of f's snapshot through cache (when pinfs ls reads
// through a cache dir): all of it as JSON, and one directory as text.
func lsView(t testing.TB, f *fixture, cache string) map[string]string {
	t.Helper()
	c := lsCacheDir(t, cache)
	return map[string]string{
		"ls --json": mustPinfs(t, f.env, append([]string{"ls", f.digest, "--store", f.store, "--json"}, c...)...).stdout,
		"ls --long unicode": mustPinfs(t, f.env,
			append([]string{"ls", f.digest, "unicode", "--store", f.store, "--long"}, c...)...).stdout,
	}
}

// runShowMembers is the members and the consumed set that pinfs run show
// --members --json reports of run id, read through cache.
func runShowMembers(t testing.TB, f *fixture, cache, record, id string) map[string]string {
	t.Helper()
	out := mustPinfs(t, f.env, "run", "show", id, "--run-record", record, "--cache-dir", cache, "--members", "--json").stdout
	var rep struct {
		Members  json.RawMessage `json:"members"`
		Consumed json.RawMessage `json:"consumed"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("run show --json: %v\n%s", err, out)
	}
	return map[string]string{"members": string(rep.Members), "consumed": string(rep.Consumed)}
}
