package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify/b3"
)

// The passthrough tests are issue 25's acceptance on a real mount: a
// member whose whole-member file is in the disk cache is handed to the
// kernel only when that file is exactly the member's bytes, and pinfs
// falls back to serving reads itself, saying why, whenever it is not.

// big is the fixture's member of several blocks (and a partial last one),
// the one the tests warm and hand over.
const big = "train/big.bin"

// passthrough is the "passthrough" object of pinfs status --json.
type passthrough struct {
	Enabled bool   `json:"enabled"`
	Reason  string `json:"reason"`
	Opens   int64  `json:"opens"`
	Bytes   int64  `json:"bytes"`
}

// ptStatus returns the live mount's status and its passthrough part,
// which it must have.
func ptStatus(t testing.TB, dir string) (mountStatus, passthrough) {
	t.Helper()
	st, r := statusJSON(t, 0, dir)
	var v struct{ Passthrough *passthrough }
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Passthrough == nil {
		t.Fatalf("pinfs status %s --json has no passthrough object (%v): %s", dir, err, r.stdout)
	}
	return st, *v.Passthrough
}

// memberFile returns the whole-member file of data in the disk tier of
// the cache dir cache: <cache>/blocks/<hex[:2]>/<hex>.
func memberFile(cache string, data []byte) string {
	h := b3.Of(data).Hex()
	return filepath.Join(cache, "blocks", h[:2], h)
}

// warmMember warms member rel of the fixture into cache and returns its
// whole-member file, which must then be a regular file of the member's
// size, mode 0400 (the layout the open path hands over).
func (f *fixture) warmMember(t *testing.T, cache, rel string, extra ...string) string {
	t.Helper()
	f.warm(t, cache, append([]string{rel}, extra...)...)
	p := memberFile(cache, f.data[rel])
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o400 || fi.Size() != int64(len(f.data[rel])) {
		t.Fatalf("after pinfs warm %s: want the whole-member file %s, regular, 0400, %d bytes: %v %v",
			rel, p, len(f.data[rel]), fi, err)
	}
	return p
}

// ptLine matches the line a mount logs once it has decided about
// passthrough, in the text and the JSON log format.
var ptLine = regexp.MustCompile(`(?m)^.*msg"?[=:]"?passthrough (on|off)\b.*$`)

// waitPassthrough waits (bounded) until the mount's log at log says
// whether passthrough is on, and returns that line; it fails the test if
// the mount said it more than once.
func waitPassthrough(t testing.TB, log string) (line string, on bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(log)
		if m := ptLine.FindAllSubmatch(b, -1); len(m) > 0 {
			if len(m) > 1 {
				t.Errorf("the mount logged %d times whether passthrough is on, want once:\n%s\n%s", len(m), m[0][0], m[1][0])
			}
			return string(m[0][0]), string(m[0][1]) == "on"
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mount did not log whether passthrough is on within 30s:\n%s", b)
		}
	}
}

// mountPT mounts the fixture with --debug (every FUSE request logged) and
// waits until passthrough is on.
func (f *fixture) mountPT(t *testing.T, cache, record string, extra ...string) (string, *daemon) {
	t.Helper()
	dir, d := f.mount(t, cache, record, append([]string{"--debug"}, extra...)...)
	if line, on := waitPassthrough(t, d.log); !on {
		t.Fatalf("passthrough is off on a root mount with a disk tier: %s", line)
	}
	return dir, d
}

// fuseReads counts the READ requests in a --debug mount log.
var fuseReads = regexp.MustCompile(`rx \d+: READ n\d+`)

// waitReleased waits (bounded) until the --debug mount log holds at least
// n RELEASE requests and the daemon has answered every one: the kernel
// sends RELEASE after close(2) returns, and until it is handled the
// inode keeps its backing file.
func waitReleased(t testing.TB, log string, n int) {
	t.Helper()
	rx := regexp.MustCompile(`rx (\d+): RELEASE n\d+`)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(log)
		ids := rx.FindAllSubmatch(b, -1)
		done := len(ids) >= n
		for _, id := range ids {
			done = done && bytes.Contains(b, []byte("tx "+string(id[1])+": "))
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mount has not handled %d RELEASEs within 20s (%d seen)", n, len(ids))
		}
	}
}

// readWant reads member rel through the mount at dir (with cat, see
// catMember) and fails the test unless it has the pinned bytes.
func (f *fixture) readWant(t testing.TB, dir, rel string) {
	t.Helper()
	if b, err := catMember(t, filepath.Join(dir, rel)); err != nil || !bytes.Equal(b, f.data[rel]) {
		t.Fatalf("%s: read %d bytes (%v), want the %d pinned ones", rel, len(b), err, len(f.data[rel]))
	}
}

// TestPassthroughServesAWarmedMember: a warmed member is handed to the
// kernel: its bytes are exact and no READ for it reaches the daemon (the
// debug log has none, bytes_served does not move), while status counts
// the open and its bytes. A member that is not warmed is read as today,
// which shows that the checks see reads when there are any.
func TestPassthroughServesAWarmedMember(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	cache := filepath.Join(f.work, "cache")
	f.warmMember(t, cache, big)
	dir, d := f.mountPT(t, cache, filepath.Join(f.work, "run.jsonl"))

	before, ptBefore := ptStatus(t, dir)
	if !ptBefore.Enabled || ptBefore.Reason != "" || ptBefore.Opens != 0 || ptBefore.Bytes != 0 {
		t.Errorf("status before any open: passthrough %+v, want enabled, no reason, no opens", ptBefore)
	}
	f.readWant(t, dir, big)
	after, pt := ptStatus(t, dir)
	size := int64(len(f.data[big]))
	if pt.Opens != 1 || pt.Bytes != size {
		t.Errorf("after reading %s (%d bytes): passthrough %+v, want 1 open of %d bytes", big, size, pt, size)
	}
	if after.BytesServed != before.BytesServed {
		t.Errorf("bytes_served went from %d to %d for a member served by passthrough", before.BytesServed, after.BytesServed)
	}
	log, _ := os.ReadFile(d.log)
	if n := len(fuseReads.FindAll(log, -1)); n != 0 {
		t.Errorf("%d READ requests reached the daemon for a member served by passthrough", n)
	}

	f.readWant(t, dir, "README") // not warmed: no whole-member file, served as today
	again, pt2 := ptStatus(t, dir)
	log, _ = os.ReadFile(d.log)
	if pt2.Opens != 1 || again.BytesServed < after.BytesServed+int64(len(f.data["README"])) || len(fuseReads.FindAll(log, -1)) == 0 {
		t.Errorf("README, not warmed: passthrough %+v, bytes_served %d -> %d, %d READs; want it served by the daemon",
			pt2, after.BytesServed, again.BytesServed, len(fuseReads.FindAll(log, -1)))
	}
}

// TestPassthroughDetectsAChangedCacheFile: a whole-member file that
// changes on disk after it was verified and handed over (one byte flipped,
// same size) is verified again at the next open in the same mount, found
// wrong, removed and recorded as a mismatch from the disk over the whole
// member; that open is served the pinned bytes from the store.
func TestPassthroughDetectsAChangedCacheFile(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	cache, record := filepath.Join(f.work, "cache"), filepath.Join(f.work, "run.jsonl")
	p := f.warmMember(t, cache, big)
	dir, d := f.mountPT(t, cache, record)
	f.readWant(t, dir, big)
	if _, pt := ptStatus(t, dir); pt.Opens != 1 {
		t.Fatalf("the first open of the warmed %s was not handed over: passthrough %+v", big, pt)
	}
	waitReleased(t, d.log, 1)

	flip(t, p, 1<<20+7) // root may write a 0400 file; mtime and ctime change
	f.readWant(t, dir, big)
	st, pt := ptStatus(t, dir)
	if pt.Opens != 1 {
		t.Errorf("the changed cache file was handed over: passthrough %+v, want 1 open (the first)", pt)
	}
	if st.IntegrityEvents.Mismatch < 1 {
		t.Errorf("status counts no mismatch after the changed cache file: %+v", st.IntegrityEvents)
	}
	// The open that found it wrong removed it; the read that followed may
	// have cached the member again, as a new file of the right bytes (an
	// inode number is no proof: a new file may reuse the old one's).
	if b, err := os.ReadFile(p); err == nil && !bytes.Equal(b, f.data[big]) {
		t.Errorf("the cache file that failed verification is still at %s", p)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}

	d.stop(t, 10*time.Second)
	var whole bool
	for _, e := range events(t, record, "mismatch") {
		r, _ := e["range"].(map[string]any)
		if e["path"] == big && e["from"] == "disk" && r["off"] == 0.0 && r["len"] == float64(len(f.data[big])) {
			whole = true
		}
	}
	if !whole {
		t.Errorf("no mismatch event from the disk over the whole of %s in the run record: %v", big, events(t, record, "mismatch"))
	}
}

// TestPassthroughChangedWhileOpen: a whole-member file that changes while
// an open of it is live (the kernel reads it for that open, which keeps
// the bytes it was handed) must not be handed to a new open unverified:
// the new open is served the pinned bytes or fails with EIO, never the
// changed bytes, and the mismatch is recorded.
func TestPassthroughChangedWhileOpen(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	cache := filepath.Join(f.work, "cache")
	p := f.warmMember(t, cache, big)
	dir, _ := f.mountPT(t, cache, filepath.Join(f.work, "run.jsonl"))
	openInChild(t, filepath.Join(dir, big))
	if _, pt := ptStatus(t, dir); pt.Opens != 1 {
		t.Fatalf("the open of the warmed %s was not handed over: passthrough %+v", big, pt)
	}
	flip(t, p, 1<<20+7)
	b, err := catMember(t, filepath.Join(dir, big))
	switch {
	case err == nil && !bytes.Equal(b, f.data[big]):
		t.Errorf("a new open of %s, changed on disk while another open was live, read %d bytes that are not the pinned ones", big, len(b))
	case err != nil && !strings.Contains(err.Error(), "Input/output error"): // strerror(EIO)
		t.Errorf("a new open of %s, changed on disk while another open was live: %v, want the pinned bytes or EIO", big, err)
	}
	if st, _ := ptStatus(t, dir); st.IntegrityEvents.Mismatch < 1 {
		t.Errorf("no mismatch counted for a cache file changed while open: %+v", st.IntegrityEvents)
	}
}

// TestPassthroughRefusesABadCacheFile: a whole-member file that holds the
// member's exact bytes but is a symbolic link, belongs to another user,
// is longer than the member, has mode 0644, or sits in a blocks dir that
// others may enter, is not handed over; the open is served as today, with
// the pinned bytes.
func TestPassthroughRefusesABadCacheFile(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	for _, c := range []struct {
		name  string
		spoil func(t *testing.T, p string)
	}{
		{"symlink", func(t *testing.T, p string) {
			real := filepath.Join(t.TempDir(), "member")
			if err := os.Rename(p, real); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, p); err != nil {
				t.Fatal(err)
			}
		}},
		{"owner", func(t *testing.T, p string) {
			if err := os.Chown(p, nobody, nobody); err != nil {
				t.Fatal(err)
			}
		}},
		{"size", func(t *testing.T, p string) {
			fh, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			// The first Size bytes are still the member's: only the size
			// check can refuse it.
			if _, err := fh.Write(bytes.Repeat([]byte{'x'}, 4096)); err != nil {
				t.Fatal(err)
			}
		}},
		{"mode", func(t *testing.T, p string) {
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"dir mode", func(t *testing.T, p string) {
			if err := os.Chmod(filepath.Dir(filepath.Dir(p)), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "cache")
			c.spoil(t, f.warmMember(t, cache, big))
			dir, _ := f.mountPT(t, cache, filepath.Join(t.TempDir(), "run.jsonl"))
			before, _ := ptStatus(t, dir)
			f.readWant(t, dir, big)
			after, pt := ptStatus(t, dir)
			if pt.Opens != 0 || pt.Bytes != 0 {
				t.Errorf("a cache file with the wrong %s was handed over: passthrough %+v", c.name, pt)
			}
			if after.BytesServed < before.BytesServed+int64(len(f.data[big])) {
				t.Errorf("bytes_served %d -> %d: the daemon did not serve %s", before.BytesServed, after.BytesServed, big)
			}
		})
	}
}
