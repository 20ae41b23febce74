package integration

import (
	"encoding/binary"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify/b3"
)

// TestIndexChanged: an index whose bytes changed after it was written is
// never served from. A changed header is refused at open, said so, and
// the index rebuilt by that mount; a changed name fails its chunk's
// digest when first read, is said so, and the mount serves the table
// from memory. Either way the mount looks as it did, and the next mount
// has a good index again.
func TestIndexChanged(t *testing.T) {
	t.Parallel()
	f := localIndexFixture(t, indexSource(t, manyFiles))
	for _, c := range []struct {
		file, msg, other string
		rebuilt          [2]int // "member table indexed" lines of the second and third mount
	}{
		{"header", indexNotUsed + ": rebuilding it from the table", indexFailed, [2]int{1, 0}},
		{"names", indexFailed, indexNotUsed, [2]int{0, 1}},
	} {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			cache, record := filepath.Join(t.TempDir(), "cache"), filepath.Join(t.TempDir(), "run.jsonl")
			dir, d := f.mount(t, cache, record)
			want := indexView(t, dir, f.data)
			d.stop(t, 30*time.Second)
			p := filepath.Join(indexOf(t, cache), c.file)
			flip(t, p, middle(t, p, c.file == "names"))

			dir, d = f.mount(t, cache, record)
			sameView(t, "a mount over a changed "+c.file, indexView(t, dir, f.data), want)
			d.stop(t, 30*time.Second)
			wantLogged(t, d, c.msg, 1)
			wantLogged(t, d, c.other, 0)
			wantLogged(t, d, indexIndexed, c.rebuilt[0])

			dir, d = f.mount(t, cache, record)
			sameView(t, "the mount after", indexView(t, dir, f.data), want)
			d.stop(t, 30*time.Second)
			wantLogged(t, d, indexNotUsed, 0)
			wantLogged(t, d, indexFailed, 0)
			wantLogged(t, d, indexIndexed, c.rebuilt[1])
			indexOf(t, cache)
		})
	}
}

// middle returns an offset in the middle of the file at p; inName moves
// it on to a digit, which in indexSource's names is in a file name rather
// than in the directory part of a path (which a listing does not read).
func middle(t testing.TB, p string, inName bool) int64 {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	off := len(b) / 2
	for inName && off < len(b) && (b[off] < '0' || b[off] > '9') {
		off++
	}
	if off == len(b) {
		t.Fatalf("%s: no digit after its middle", p)
	}
	return int64(off)
}

// TestIndexForeign: an intact index of another table put under a table's
// name, and an intact index of another format version, are not used: the
// mount says why, rebuilds the index and serves its own table. The other
// table has the same paths, member count and bytes, so that only the
// table digest in the header tells the two indexes apart.
func TestIndexForeign(t *testing.T) {
	t.Parallel()
	dataA := indexSource(t, 3)
	dataB := maps.Clone(dataA)
	dataB["a-b"] = []byte("a dash B\n")
	a, b := localIndexFixture(t, dataA), localIndexFixture(t, dataB)
	cache := filepath.Join(t.TempDir(), "cache")
	record := filepath.Join(t.TempDir(), "run.jsonl")

	_, d := a.mount(t, cache, record)
	d.stop(t, 30*time.Second)
	ixA := indexOf(t, cache)
	if err := os.Rename(ixA, ixA+".a"); err != nil { // out of the way of b's
		t.Fatal(err)
	}
	dir, d := b.mount(t, cache, record)
	want := indexView(t, dir, dataB)
	d.stop(t, 30*time.Second)
	ixB := indexOf(t, cache)

	if err := os.RemoveAll(ixB); err != nil {
		t.Fatal(err)
	}
	copyIndex(t, ixA+".a", ixB)
	dir, d = b.mount(t, cache, record)
	sameView(t, "a mount over another table's index", indexView(t, dir, dataB), want)
	d.stop(t, 30*time.Second)
	wantLogged(t, d, indexNotUsed, 1)
	wantLogged(t, d, "built for another table or format version", 1)
	wantLogged(t, d, indexIndexed, 1)

	reversion(t, filepath.Join(indexOf(t, cache), "header"), 2)
	dir, d = b.mount(t, cache, record)
	sameView(t, "a mount over an index of format version 2", indexView(t, dir, dataB), want)
	d.stop(t, 30*time.Second)
	wantLogged(t, d, indexNotUsed, 1)
	wantLogged(t, d, "format version 2, not 1", 1)
	wantLogged(t, d, indexIndexed, 1)
}

// copyIndex copies the index directory from to to, private as the
// metadata cache keeps it.
func copyIndex(t testing.TB, from, to string) {
	t.Helper()
	es, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(to, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// reversion rewrites the index header at p as one of format version v,
// with the digest that closes it made again: an intact header of another
// version.
func reversion(t testing.TB, p string, v uint32) {
	t.Helper()
	const magic = "pinfs table index\n" // verify/indexheader.go
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < len(magic)+4+32 || string(b[:len(magic)]) != magic {
		t.Fatalf("%s is not an index header", p)
	}
	binary.LittleEndian.PutUint32(b[len(magic):], v)
	sum := b3.Of(b[:len(b)-32])
	copy(b[len(b)-32:], sum[:])
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
