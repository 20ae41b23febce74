package localstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/b3"
)

func newStore(t testing.TB) (*Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func digestOf(i int) string {
	return fmt.Sprintf("blake3:%064x", i)
}

// casOf returns the CAS digest of data.
func casOf(data []byte) string { return b3.Of(data).String() }

// casFile returns the file of the CAS blob with digest d under dir.
func casFile(dir, d string) string {
	return filepath.Join(dir, "cas", "blake3", strings.TrimPrefix(d, b3.Prefix))
}

func TestNewRefusesFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(f); err == nil {
		t.Fatal("New on a regular file: want error")
	}
}

func TestPutGet(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	data := []byte("manifest bytes")
	if err := s.Put(ctx, "manifests/sha256/abc", data); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "manifests/sha256/abc")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %q, %v; want %q", got, err, data)
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, "manifests", "sha256", "abc"))
	if err != nil || !bytes.Equal(onDisk, data) {
		t.Fatalf("file = %q, %v", onDisk, err)
	}
	assertNoTemps(t, dir)
}

func TestGetMissing(t *testing.T) {
	s, _ := newStore(t)
	for _, key := range []string{"nope", "a/b/c"} {
		_, err := s.Get(context.Background(), key)
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%q) = %v; want ErrNotFound", key, err)
		}
	}
	// A key under an existing file (ENOTDIR) is also simply missing.
	if err := s.Put(context.Background(), "file", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(context.Background(), "file/below"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(file/below) = %v; want ErrNotFound", err)
	}
}

func TestPutIdempotent(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	p := filepath.Join(dir, "k")
	if err := s.Put(ctx, "k", []byte("same")); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "k", []byte("same")); err != nil {
		t.Fatalf("second Put of identical bytes: %v", err)
	}
	after, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Error("identical Put replaced the file; want a no-op")
	}
}

func TestPutConflict(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	if err := s.Put(ctx, "k", []byte("first")); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"other", "firsT", "first and more", ""} {
		if err := s.Put(ctx, "k", []byte(other)); err == nil {
			t.Errorf("Put(k, %q) over %q: want error", other, "first")
		}
	}
	got, err := s.Get(ctx, "k")
	if err != nil || string(got) != "first" {
		t.Fatalf("after conflicts Get = %q, %v; want the original", got, err)
	}
}

// TestPutConcurrent races writers of the same key: all with equal bytes
// succeed; with two different payloads, exactly the winner's bytes remain
// and every loser gets an error.
func TestPutConcurrent(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Put(ctx, "same", []byte("payload"))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}

	payloads := []string{"AAAA", "BBBB"}
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Put(ctx, "race", []byte(payloads[i%2]))
		}()
	}
	wg.Wait()
	got, err := s.Get(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if wrote := payloads[i%2]; (wrote == string(got)) != (err == nil) {
			t.Errorf("writer %d of %q: err %v, but the key holds %q", i, wrote, err, got)
		}
	}
	assertNoTemps(t, dir)
}

func TestHostileKeys(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	outside := filepath.Join(filepath.Dir(dir), "outside")
	for _, key := range []string{
		"", "/etc/passwd", "../outside", "a/../../outside", "a/..", "..",
		"a//b", "a/", "/", "./a", "a/./b", `a\b`, `..\outside`, "a\x00b",
	} {
		if err := s.Put(ctx, key, []byte("x")); err == nil {
			t.Errorf("Put(%q): want error", key)
		}
		if _, err := s.Get(ctx, key); err == nil || errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%q) = %v; want a key error", key, err)
		}
	}
	if _, err := os.Stat(outside); err == nil {
		t.Fatal("a hostile key wrote outside the store")
	}
}

func TestCASRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	data := bytes.Repeat([]byte("0123456789"), 1000)
	d := casOf(data)
	obj, err := s.PutCAS(ctx, d, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.Object{CAS: d}); obj != want {
		t.Fatalf("PutCAS = %+v; want %+v", obj, want)
	}
	if _, err := os.Stat(casFile(dir, d)); err != nil {
		t.Fatalf("CAS file not at cas/blake3/<hex>: %v", err)
	}
	info, err := s.Stat(ctx, obj)
	if err != nil || info.Size != int64(len(data)) {
		t.Fatalf("Stat = %+v, %v; want size %d", info, err, len(data))
	}
	got := readAll(t, s, obj, 0, -1)
	if !bytes.Equal(got, data) {
		t.Fatal("whole read differs")
	}

	// A second PutCAS of a present, intact blob does not read its reader.
	if _, err := s.PutCAS(ctx, d, failingReader{}, int64(len(data))); err != nil {
		t.Fatalf("PutCAS of a present blob read its reader: %v", err)
	}
	// A file of another size is replaced: it cannot hold those bytes.
	if err := os.WriteFile(casFile(dir, d), []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutCAS(ctx, d, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, obj, 0, -1); !bytes.Equal(got, data) {
		t.Fatalf("after replace read %.20q...", got)
	}
	assertNoTemps(t, dir)
}

// TestPutCASReplacesBadBlobOfRightSize: an existing blob is not trusted
// by its size. One with the right size but other bytes is replaced.
func TestPutCASReplacesBadBlobOfRightSize(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	data := bytes.Repeat([]byte("good"), 3*b3.GroupSize/4)
	d := casOf(data)
	p := casFile(dir, d)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bytes.Repeat([]byte("bad!"), len(data)/4), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutCAS(ctx, d, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("blob after PutCAS over a bad one of the same size: %.20q..., %v; want the given bytes", got, err)
	}
	assertNoTemps(t, dir)
}

// TestPutCASRefusesBytesOfAnotherDigest: the store hashes what it writes
// and keeps nothing that does not match the digest it was given.
func TestPutCASRefusesBytesOfAnotherDigest(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	d := casOf([]byte("the pinned bytes"))
	if _, err := s.PutCAS(ctx, d, strings.NewReader("the pinned bytez"), 16); !errors.Is(err, b3.ErrMismatch) {
		t.Fatalf("PutCAS of bytes that do not hash to the digest = %v; want b3.ErrMismatch", err)
	}
	if _, err := s.Stat(ctx, store.Object{CAS: d}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused PutCAS left a blob behind: Stat = %v", err)
	}
	// Nor does a refused PutCAS replace a good blob already there.
	if _, err := s.PutCAS(ctx, d, strings.NewReader("the pinned bytes"), 16); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(casFile(dir, d), []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutCAS(ctx, d, strings.NewReader("the pinned bytez"), 16); !errors.Is(err, b3.ErrMismatch) {
		t.Fatalf("PutCAS of wrong bytes over a bad blob = %v; want b3.ErrMismatch", err)
	}
	if got, _ := os.ReadFile(casFile(dir, d)); string(got) != "short" {
		t.Errorf("a refused PutCAS replaced the blob with %q", got)
	}
	assertNoTemps(t, dir)
}

func TestPutCASChecksSize(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	if _, err := s.PutCAS(ctx, digestOf(2), strings.NewReader("abc"), 4); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("reader shorter than size: %v; want io.ErrUnexpectedEOF", err)
	}
	if _, err := s.PutCAS(ctx, digestOf(2), strings.NewReader("abcde"), 4); err == nil {
		t.Error("reader longer than size: want error")
	}
	if _, err := s.PutCAS(ctx, "sha256:abc", strings.NewReader("abc"), 3); err == nil {
		t.Error("bad digest: want error")
	}
	if _, err := s.Stat(ctx, store.Object{CAS: digestOf(2)}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a failed PutCAS left a blob behind: Stat = %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.PutCAS(cctx, digestOf(3), strings.NewReader("abc"), 3); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled PutCAS = %v", err)
	}
	assertNoTemps(t, dir)
}

func TestReadRange(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	data := []byte("abcdefghijklmnopqrstuvwxyz")
	obj, err := s.PutCAS(ctx, casOf(data), bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ off, length int64 }{
		{0, -1}, {0, 26}, {0, 1}, {5, 10}, {25, 1}, {10, -1}, {26, -1}, {26, 0}, {3, 0},
	} {
		want := data[tc.off:]
		if tc.length >= 0 {
			want = want[:tc.length]
		}
		if got := readAll(t, s, obj, tc.off, tc.length); !bytes.Equal(got, want) {
			t.Errorf("ReadRange(%d, %d) = %q; want %q", tc.off, tc.length, got, want)
		}
	}
	if _, err := s.ReadRange(ctx, obj, 27, 1); err == nil {
		t.Error("off beyond size: want error")
	}
	if _, err := s.ReadRange(ctx, obj, -1, 1); err == nil {
		t.Error("negative off: want error")
	}
	if _, err := s.ReadRange(ctx, store.Object{CAS: digestOf(99)}, 0, 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing blob: %v; want ErrNotFound", err)
	}
}

func TestReadRangeShortFile(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	obj, err := s.PutCAS(ctx, casOf([]byte("0123456789")), strings.NewReader("0123456789"), 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ off, length int64 }{{0, 11}, {5, 6}, {8, 100}} {
		rc, err := s.ReadRange(ctx, obj, tc.off, tc.length)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(rc)
		rc.Close()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("ReadRange(%d, %d) past the end: %v; want io.ErrUnexpectedEOF", tc.off, tc.length, err)
		}
	}
	// A file truncated after ReadRange opened it (length < 0 reads the size
	// seen at open).
	rc, err := s.ReadRange(ctx, obj, 2, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := os.Truncate(casFile(dir, obj.CAS), 6); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(rc); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated under the reader: %q, %v; want io.ErrUnexpectedEOF", got, err)
	}
}

func TestRefusesS3Objects(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	obj, err := store.NewVersion("bucket", "key", "v1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadRange(ctx, obj, 0, 1); err == nil || !strings.Contains(err.Error(), "cannot read S3 object") {
		t.Errorf("ReadRange of an S3 object = %v; want a clear refusal", err)
	}
	if _, err := s.Stat(ctx, obj); err == nil || !strings.Contains(err.Error(), "cannot read S3 object") {
		t.Errorf("Stat of an S3 object = %v; want a clear refusal", err)
	}
	if _, err := s.Stat(ctx, store.Object{Bucket: "b", Key: "k"}); !errors.Is(err, store.ErrNoVersion) {
		t.Errorf("Stat of an unversioned object = %v; want ErrNoVersion", err)
	}
	if _, err := s.Stat(ctx, store.Object{}); err == nil {
		t.Error("Stat of a zero Object: want error")
	}
}

func readAll(t testing.TB, s *Store, obj store.Object, off, length int64) []byte {
	t.Helper()
	rc, err := s.ReadRange(context.Background(), obj, off, length)
	if err != nil {
		t.Fatalf("ReadRange(%d, %d): %v", off, length, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("ReadRange(%d, %d): read: %v", off, length, err)
	}
	return b
}

// assertNoTemps fails if a temporary file was left anywhere in dir.
func assertNoTemps(t testing.TB, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".tmp-") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("must not be read") }
