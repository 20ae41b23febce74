package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// spec describes a member of a test snapshot.
type spec struct {
	path, split string
	size        int64
	cas         bool // a CAS member; an S3 member otherwise
}

// fixture is the test snapshot: names that sort differently by byte and
// by component ("a.b" before "a/"), upper case, non-ASCII, an empty file,
// a multi-block file with an odd size, S3 and CAS members, with and
// without a split.
var fixture = []spec{
	{path: "README.txt", size: 11, cas: true},
	{path: "Z.txt", size: 1},
	{path: "a.b", size: 3},
	{path: "a/x.bin", size: 4096},
	{path: "a/y/z.bin", size: 65537},
	{path: "a-b/c", size: 5},
	{path: "train/part-000.jsonl", split: "train", size: 200_003},
	{path: "train/part-001.jsonl", split: "train", size: 0},
	{path: "val/part-000.jsonl", split: "val", size: 70_000, cas: true},
	{path: "ü.txt", size: 2},
}

// mtime is the fixed time of every node in the tests, with nanoseconds so
// that they are checked too.
var mtime = time.Unix(1_700_000_000, 123_456_789)

const testUID, testGID = 4321, 8765

// content returns the fake bytes of member path.
func content(path string, size int64) []byte {
	b := make([]byte, size)
	seed := len(path) * 7
	for k := range b {
		b[k] = byte((k*31 + seed + k/251) % 256)
	}
	return b
}

// snapshot builds a verified snapshot of specs and returns it with the
// bytes of each member, in member order.
func snapshot(t testing.TB, specs []spec) (*verify.Snapshot, [][]byte) {
	t.Helper()
	specs = slices.Clone(specs)
	slices.SortFunc(specs, func(a, b spec) int { return strings.Compare(a.path, b.path) })
	var ms []verify.Member
	var data [][]byte
	for _, s := range specs {
		b := content(s.path, s.size)
		d := b3.Of(b).String()
		m := verify.Member{ID: "id:" + s.path, Path: s.path, Split: s.split, Size: s.size, Digest: d}
		if s.cas {
			m.CAS = d
		} else {
			m.S3 = &verify.S3Source{Bucket: "bucket", Key: "data/" + s.path, VersionID: "v." + s.path, ETag: `"etag"`}
		}
		ms = append(ms, m)
		data = append(data, b)
	}
	snap, err := verifytest.Snapshot(ms, "fs test")
	if err != nil {
		t.Fatal(err)
	}
	return snap, data
}

// memReader serves member bytes from memory. fail makes member i fail
// with an error; block makes every read wait until its context is done.
type memReader struct {
	data  [][]byte
	fail  map[int]error
	short map[int]bool // return one byte less than asked
	block bool

	mu     sync.Mutex
	opened map[int]int
}

var _ Opener = (*memReader)(nil)

func (r *memReader) ReadAt(ctx context.Context, i int, p []byte, off int64) (int, error) {
	if r.block {
		<-ctx.Done()
		return 0, fmt.Errorf("fetch: %w", ctx.Err())
	}
	if err := r.fail[i]; err != nil {
		return 0, err
	}
	if off >= int64(len(r.data[i])) {
		return 0, fmt.Errorf("offset %d beyond member %d", off, i)
	}
	n := copy(p, r.data[i][off:])
	if r.short[i] && n > 0 {
		return n - 1, nil // a Reader that breaks the contract
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (r *memReader) Opened(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opened == nil {
		r.opened = map[int]int{}
	}
	r.opened[i]++
}

func (r *memReader) openCount(i int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opened[i]
}

// mismatchErr returns the error the block reader gives for the first
// block of member m with bytes data when both copies fetched fail
// verification: what b3.Verify returns for damaged bytes, wrapped as
// store/blocks wraps it.
func mismatchErr(t testing.TB, m verify.Member, data []byte) error {
	t.Helper()
	sum, outboard, err := b3.Encode(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	n := min(len(data), b3.GroupSize)
	bad := slices.Clone(data[:n])
	bad[n/2] ^= 1
	verr := b3.Verify(sum, outboard, int64(len(data)), 0, bad)
	if !errors.Is(verr, b3.ErrMismatch) {
		t.Fatalf("b3.Verify of a damaged block of %s = %v, want a mismatch", m.Path, verr)
	}
	return fmt.Errorf("blocks: %s (%s %s) bytes 0+%d, fetched twice: %w", m.Path, m.Source(), m.VersionID(), n, verr)
}

// testOptions are the Options of every test tree.
func testOptions() Options {
	return Options{UID: testUID, GID: testGID, Mtime: mtime}
}
