package origin

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"log/slog"
	"math/bits"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
	"lukechampine.com/blake3/guts"
)

// plant writes b at key in the local store at dir, over what is there.
func plant(t testing.TB, dir, key string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o600)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// readBlob reads key from the local store at dir.
func readBlob(t testing.TB, dir, key string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// getFull GETs url and reports the answer, its body and whether the body
// came whole (as long as its Content-Length, without a read error). A
// connection cut before the answer's header is an answer of status 0.
func getFull(t testing.TB, url string, hdr ...string) (*http.Response, []byte, bool) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Logf("GET %s: %v", url, err)
		return &http.Response{Header: http.Header{}}, nil, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err == nil && (resp.ContentLength < 0 || int64(len(b)) == resp.ContentLength)
}

// table plants n random bytes as a member table (any bytes are one, by
// their SHA-256) and returns its key and bytes.
func plantTable(t testing.TB, dir string, n int) (string, []byte) {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	sum := sha256.Sum256(b)
	key := "members/sha256/" + hex.EncodeToString(sum[:])
	plant(t, dir, key, b)
	return key, b
}

// TestTamperedManifestNeverServed: a manifest whose bytes do not match
// its name is refused, never answered 200 (nginx would keep it for good).
func TestTamperedManifestNeverServed(t *testing.T) {
	f := newFixture(t, Config{})
	key := "manifests/sha256/" + strings.TrimPrefix(string(f.snap), "sha256:")
	good := readBlob(t, f.dir, key)
	if resp, body, whole := getFull(t, f.url+"/"+key); resp.StatusCode != 200 || !whole || !bytes.Equal(body, good) {
		t.Fatalf("the good manifest: %s, %d bytes", resp.Status, len(body))
	}
	bad := bytes.Replace(good, []byte(`"count":2`), []byte(`"count":3`), 1)
	if bytes.Equal(bad, good) {
		t.Fatalf("the manifest does not count 2 members:\n%s", good)
	}
	plant(t, f.dir, key, bad)
	resp, _, _ := getFull(t, f.url+"/"+key)
	if resp.StatusCode == 200 || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("a tampered manifest: %s (Cache-Control %q), want a refusal", resp.Status, resp.Header.Get("Cache-Control"))
	}
}

// TestTamperedOutboardNeverServed: an outboard in the store with any
// byte changed is never answered 200 whole: a bad header or root node
// is refused, a bad node further on cuts the answer short of its length.
func TestTamperedOutboardNeverServed(t *testing.T) {
	f := newFixture(t, Config{})
	d, _ := b3.Parse(f.ms[0].Digest)
	key := verify.OutboardKey(d.Hex())
	good := readBlob(t, f.dir, key)
	url := f.url + "/" + key
	if resp, body, whole := getFull(t, url); resp.StatusCode != 200 || !whole || !bytes.Equal(body, good) {
		t.Fatalf("the good outboard: %s, %d of %d bytes", resp.Status, len(body), len(good))
	}
	if len(good) != 8+32*64 {
		t.Fatalf("the outboard of 33 groups is %d bytes", len(good))
	}
	for i := range good {
		if i < 2 || i >= 72 && i%64 != 17 {
			// Every byte of the header and root node, one of each other
			// node. The header's two low bytes are left out: a size off by
			// less than a group gives the same tree, which CheckOutboard
			// passes too (only a member's bytes tell its exact size).
			continue
		}
		bad := bytes.Clone(good)
		bad[i] ^= 0x40
		plant(t, f.dir, key, bad)
		resp, body, whole := getFull(t, url)
		if resp.StatusCode == 200 && whole {
			t.Fatalf("byte %d changed: 200 with all %d bytes", i, len(body))
		}
		if resp.StatusCode != 200 && resp.StatusCode != 0 && resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("byte %d changed: %s with Cache-Control %q", i, resp.Status, resp.Header.Get("Cache-Control"))
		}
		if i < 72 && resp.StatusCode == 200 {
			t.Fatalf("byte %d (header or root node) changed: 200, want a refusal", i)
		}
	}
	for name, bad := range map[string][]byte{
		"short": good[:len(good)-1], "long": append(bytes.Clone(good), 0), "empty": nil, "header only": good[:8],
	} {
		plant(t, f.dir, key, bad)
		if resp, _, whole := getFull(t, url); resp.StatusCode == 200 && whole {
			t.Fatalf("%s: 200 whole", name)
		}
	}
}

// TestTableMismatchCut: a member table whose bytes do not hash to its
// name is cut short of its Content-Length, from the store and from the
// origin's copy; a bad copy is then replaced from the store.
func TestTableMismatchCut(t *testing.T) {
	f := newFixture(t, Config{TableDir: t.TempDir(), TableRefresh: time.Nanosecond})
	key, good := plantTable(t, f.dir, 300<<10)
	bad := bytes.Clone(good)
	bad[len(bad)-1] ^= 1
	plant(t, f.dir, key, bad)
	resp, body, whole := getFull(t, f.url+"/"+key)
	if whole || resp.ContentLength != int64(len(bad)) || int64(len(body)) >= resp.ContentLength {
		t.Fatalf("a table that does not match: %s, %d of %d bytes, whole %v: want it cut short", resp.Status, len(body), resp.ContentLength, whole)
	}
	plant(t, f.dir, key, good)
	if resp, body, whole := getFull(t, f.url+"/"+key); resp.StatusCode != 200 || !whole || !bytes.Equal(body, good) {
		t.Fatalf("the good table: %s, %d bytes", resp.Status, len(body))
	}
	// The copy goes bad on the origin's disk.
	cp := filepath.Join(f.h.cfg.TableDir, strings.TrimPrefix(key, "members/sha256/"))
	if err := os.WriteFile(cp, bad, 0o600); err != nil {
		t.Fatalf("the origin's copy: %v", err)
	}
	if _, body, whole := getFull(t, f.url+"/"+key); whole || bytes.Equal(body, bad) {
		t.Fatalf("a bad copy: %d bytes, whole %v: want it cut short", len(body), whole)
	}
	if resp, body, whole := getFull(t, f.url+"/"+key); resp.StatusCode != 200 || !whole || !bytes.Equal(body, good) {
		t.Fatalf("after a bad copy: %s, %d bytes, want the table from the store", resp.Status, len(body))
	}
}

// countingStore counts the reads of each key from its store.
type countingStore struct {
	store.Store
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingStore) count(key string) {
	c.mu.Lock()
	c.reads[key]++
	c.mu.Unlock()
}

func (c *countingStore) n(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[key]
}

func (c *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	c.count(key)
	return c.Store.Get(ctx, key)
}

func (c *countingStore) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	c.count(key)
	return c.Store.(opener).Open(ctx, key)
}

// abandon sends a GET of path with hdr to addr, reads the status line
// and leaves.
func abandon(t testing.TB, addr, path string, hdr ...string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET /" + path + " HTTP/1.1\r\nHost: origin\r\n" + strings.Join(hdr, "") + "\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return line
}

// waitIdle waits (at most 10 s) until h answers no request.
func waitIdle(t testing.TB, h *Handler) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(h.slots) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still in flight after 10 s", len(h.slots))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBypassReadsStoreOnce: twenty bypass requests for a member table,
// each abandoned after its status line, read it from the store once; the
// rest are answered from the origin's verified copy.
func TestBypassReadsStoreOnce(t *testing.T) {
	f := newFixture(t, Config{TableDir: t.TempDir(), TableRefresh: time.Hour})
	cs := &countingStore{Store: f.h.cfg.Store, reads: map[string]int{}}
	f.h.cfg.Store = cs
	key, good := plantTable(t, f.dir, 8<<20)
	addr := strings.TrimPrefix(f.url, "http://")
	for i := range 20 {
		if line := abandon(t, addr, key, "X-Pinfs-Bypass: 1\r\n"); !strings.Contains(line, " 200 ") {
			t.Fatalf("request %d: %q", i, line)
		}
	}
	waitIdle(t, f.h)
	if n := cs.n(key); n > 1 {
		t.Fatalf("20 abandoned bypass requests read the table from the store %d times, want at most 1", n)
	}
	if resp, body, whole := getFull(t, f.url+"/"+key, "X-Pinfs-Bypass", "1"); resp.StatusCode != 200 || !whole || !bytes.Equal(body, good) {
		t.Fatalf("the table after: %s, %d bytes", resp.Status, len(body))
	}
	if n := cs.n(key); n > 1 {
		t.Fatalf("read from the store %d times", n)
	}
}

// TestBypassRepairsAfterRefresh: once TableRefresh has passed, a bypass
// reads the store again (the repair), and a plain request never does.
func TestBypassRepairsAfterRefresh(t *testing.T) {
	f := newFixture(t, Config{TableDir: t.TempDir(), TableRefresh: time.Nanosecond})
	cs := &countingStore{Store: f.h.cfg.Store, reads: map[string]int{}}
	f.h.cfg.Store = cs
	key, good := plantTable(t, f.dir, 200<<10)
	for i, bypass := range []string{"", "", "1", "", "1"} {
		resp, body, whole := getFull(t, f.url+"/"+key, "X-Pinfs-Bypass", bypass)
		if resp.StatusCode != 200 || !whole || !bytes.Equal(body, good) {
			t.Fatalf("request %d: %s, %d bytes", i, resp.Status, len(body))
		}
	}
	if n := cs.n(key); n != 3 {
		t.Fatalf("the store read %d times, want 3 (the first request and two bypasses)", n)
	}
}

// TestRefusalsSayNoStoreDetail: a refusal names what was asked and a
// generic reason; the store's error (its paths) goes to the log only.
func TestRefusalsSayNoStoreDetail(t *testing.T) {
	var logged bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := newFixture(t, Config{Log: log, TableDir: t.TempDir()})
	other := strings.Repeat("cd", 32)
	// A directory where a blob should be: the store's error names its path.
	for _, key := range []string{"bao/blake3/" + other, "members/sha256/" + other, "manifests/sha256/" + other} {
		if err := os.MkdirAll(filepath.Join(f.dir, key), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	huge := "bao/blake3/" + strings.Repeat("ef", 32)
	hdr := binary.LittleEndian.AppendUint64(nil, 1<<50)
	plant(t, f.dir, huge, hdr)
	for _, key := range []string{"bao/blake3/" + other, "members/sha256/" + other, "manifests/sha256/" + other,
		"manifests/sha256/" + strings.Repeat("01", 32), huge} {
		resp, body, _ := getFull(t, f.url+"/"+key)
		if resp.StatusCode < 400 || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: %s, want a refusal", key, resp.Status)
		}
		for _, secret := range []string{f.dir, filepath.Base(f.dir), "localstore", "open", "directory"} {
			if bytes.Contains(body, []byte(secret)) {
				t.Errorf("GET %s: %s %q: names %q", key, resp.Status, body, secret)
			}
		}
		if h := key[strings.LastIndexByte(key, '/')+1:]; !bytes.Contains(body, []byte(h)) {
			t.Errorf("GET %s: %q does not say what was asked", key, body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), f.dir) {
		t.Errorf("the log lacks the store's errors:\n%s", logged.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// fakeOutboard returns a valid outboard of a member of groups whole
// groups that exists nowhere (random chaining values at its leaves) and
// the digest it hashes to: an outboard as large as a test needs, for free.
func fakeOutboard(groups int) (b3.Sum, []byte) {
	size := uint64(groups) * b3.GroupSize
	ob := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+64*(groups-1)), size)
	var build func(n uint64, flags uint32) [8]uint32
	build = func(n uint64, flags uint32) [8]uint32 {
		var cv [8]uint32
		if n <= b3.GroupSize {
			var b [32]byte
			rand.Read(b[:])
			for i := range cv {
				cv[i] = binary.LittleEndian.Uint32(b[4*i:])
			}
			return cv
		}
		at := len(ob)
		ob = append(ob, make([]byte, 64)...)
		mid := uint64(1) << (bits.Len64(n-1) - 1)
		l, r := build(mid, 0), build(n-mid, 0)
		for i := range 8 {
			binary.LittleEndian.PutUint32(ob[at+4*i:], l[i])
			binary.LittleEndian.PutUint32(ob[at+32+4*i:], r[i])
		}
		return guts.ChainingValue(guts.ParentNode(l, r, &guts.IV, flags))
	}
	root := build(size, guts.FlagRoot)
	var d b3.Sum
	for i, w := range root {
		binary.LittleEndian.PutUint32(d[4*i:], w)
	}
	return d, ob
}

// TestLargeOutboardCutShort: a bad header or root node of a large
// outboard is refused cleanly; a node far into it that does not check
// cuts the answer, begun with the outboard's length, short of it; the
// good outboard streams whole.
func TestLargeOutboardCutShort(t *testing.T) {
	f := newFixture(t, Config{})
	d, good := fakeOutboard(8000)
	if err := b3.CheckOutboard(d, 8000*b3.GroupSize, good); err != nil {
		t.Fatalf("fakeOutboard: %v", err)
	}
	key := verify.OutboardKey(d.Hex())
	plant(t, f.dir, key, good)
	if resp, body, whole := getFull(t, f.url+"/"+key); resp.StatusCode != 200 || !whole || !bytes.Equal(body, good) {
		t.Fatalf("the good outboard: %s, %d of %d bytes", resp.Status, len(body), len(good))
	}
	// A bad header or root node is a clean refusal, before any answer.
	for _, at := range []int{5, 8 + 40} {
		bad := bytes.Clone(good)
		bad[at] ^= 1
		plant(t, f.dir, key, bad)
		if resp, body, _ := getFull(t, f.url+"/"+key); resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("byte %d changed: %s (Cache-Control %q, %d bytes), want 502 no-store", at, resp.Status, resp.Header.Get("Cache-Control"), len(body))
		}
	}
	for _, at := range []int{200_000, len(good) - 1} {
		bad := bytes.Clone(good)
		bad[at] ^= 1
		plant(t, f.dir, key, bad)
		resp, body, whole := getFull(t, f.url+"/"+key)
		if resp.StatusCode != 200 || whole || resp.ContentLength != int64(len(good)) || len(body) > at {
			t.Fatalf("byte %d changed: %s, %d of %d bytes, whole %v: want 200 cut short before it", at, resp.Status, len(body), resp.ContentLength, whole)
		}
	}
}

// TestManifestBudget: the bytes of manifests held at once to be checked
// are bounded: a manifest that finds the budget spent waits QueueWait,
// then gets 503; once the budget is back it is served.
func TestManifestBudget(t *testing.T) {
	f := newFixture(t, Config{ManifestBudget: 1 << 20, QueueWait: 200 * time.Millisecond})
	key := "manifests/sha256/" + strings.TrimPrefix(string(f.snap), "sha256:")
	if got := f.h.manifests.acquire(context.Background(), 1<<20, time.Second); got != 1<<20 {
		t.Fatalf("the whole budget: took %d", got)
	}
	resp, _, _ := getFull(t, f.url+"/"+key)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a manifest with the budget spent: %s, want 503 with Retry-After", resp.Status)
	}
	f.h.manifests.release(1 << 20)
	if resp, body, whole := getFull(t, f.url+"/"+key); resp.StatusCode != 200 || !whole || len(body) == 0 {
		t.Fatalf("a manifest with the budget back: %s", resp.Status)
	}
	waitIdle(t, f.h) // the handler gives the budget back before its place
	f.h.manifests.mu.Lock()
	defer f.h.manifests.mu.Unlock()
	if f.h.manifests.left != 1<<20 {
		t.Fatalf("the budget after: %d left, want all of it", f.h.manifests.left)
	}
}

// TestTableWithoutCopies: when no copy can be kept (TableDir is not a
// directory), every request reads the table from the store and gets it,
// rather than the rate limit's 503.
func TestTableWithoutCopies(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o600)
	f := newFixture(t, Config{TableDir: notDir, TableRefresh: time.Hour})
	key, good := plantTable(t, f.dir, 200<<10)
	for i := range 3 {
		if resp, body, whole := getFull(t, f.url+"/"+key, "X-Pinfs-Bypass", "1"); resp.StatusCode != 200 || !whole || !bytes.Equal(body, good) {
			t.Fatalf("request %d: %s, %d bytes", i, resp.Status, len(body))
		}
	}
}
