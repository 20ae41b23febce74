package verify_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

// indexing is a streaming store with an index directory and a log that
// keeps its messages.
type indexing struct {
	*opener
	dir    string
	noCopy int
	mu     sync.Mutex
	msg    []string
}

func (x *indexing) IndexDir() string { return x.dir }

// OpenNoCopy counts the tables streamed for an index.
func (x *indexing) OpenNoCopy(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	x.noCopy++
	return x.Open(ctx, key)
}

func (x *indexing) IndexLog() *slog.Logger { return slog.New(x) }

func (x *indexing) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (x *indexing) Handle(_ context.Context, r slog.Record) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.msg = append(x.msg, r.Message)
	return nil
}
func (x *indexing) WithAttrs([]slog.Attr) slog.Handler { return x }
func (x *indexing) WithGroup(string) slog.Handler      { return x }

func (x *indexing) logged() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	m := x.msg
	x.msg = nil
	return m
}

// treeMembers are members whose tree has what an index must get right:
// unicode, deep paths, directories holding only directories, and names
// with bytes that sort before '/' (so that table order is not name order).
func treeMembers() []verify.Member {
	var ms []verify.Member
	for _, p := range []string{
		"a-b", "a/b-c", "a/b/c", "a/b/d/e/f/g/h.bin", "a/b!", "z/日本/データ.jpg", "z/日本語", "z/ü/x",
		"deep/1/2/3/4/5/6/7/8/9/10/leaf", "only/dirs/here/x", "top",
	} {
		ms = append(ms, casMember(p))
	}
	for i := range 300 {
		ms = append(ms, s3Member(fmt.Sprintf("many/f%04d", i)))
	}
	slicesSortByPath(ms)
	return ms
}

func slicesSortByPath(ms []verify.Member) {
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && ms[j-1].Path > ms[j].Path; j-- {
			ms[j-1], ms[j] = ms[j], ms[j-1]
		}
	}
}

// dumpTree lists every node of t's tree, depth first, with what a mount
// shows of it.
func dumpTree(t *verify.Table) []string {
	var out []string
	var walk func(d int32, prefix string)
	walk = func(d int32, prefix string) {
		dd := t.Dir(d)
		for j := range int(dd.N) {
			k := t.Child(&dd, j)
			name := t.NodeName(k)
			if got, ok := t.Lookup(&dd, name); !ok || got != k {
				out = append(out, fmt.Sprintf("lookup %q in %q: %d %v, want %d", name, prefix, got, ok, k))
			}
			i, sub, isDir := t.Node(k)
			if isDir {
				s := t.Dir(sub)
				out = append(out, fmt.Sprintf("%d %s%s/ parent=%d subdirs=%d n=%d", k, prefix, name, s.Parent, s.Subdirs, s.N))
				walk(sub, prefix+name+"/")
				continue
			}
			out = append(out, fmt.Sprintf("%d %s%s member=%d path=%s size=%d", k, prefix, name, i, t.Path(i), t.Size(i)))
		}
		if _, ok := t.Lookup(&dd, "no such name"); ok {
			out = append(out, "lookup of a missing name in "+prefix+" found one")
		}
	}
	walk(0, "")
	return append(out, fmt.Sprintf("dirs=%d nodes=%d", t.Dirs(), t.Nodes()))
}

func newIndexing(t *testing.T, ms []verify.Member) (*indexing, *verify.Manifest, []byte) {
	t.Helper()
	m, mb, table := buildSnapshot(t, ms, nil)
	td, _ := m.Members.Digest()
	o := &opener{store: store{verify.ManifestKey(m.SnapshotID): mb, verify.MembersKey(td): table}}
	return &indexing{opener: o, dir: filepath.Join(t.TempDir(), "index")}, m, table
}

// TestIndexServesWhatTheTableSays: a table read through an Indexer is
// indexed; the next Fetch maps the index without reading the table, and
// both give exactly what the table parsed in memory gives.
func TestIndexServesWhatTheTableSays(t *testing.T) {
	ms := treeMembers()
	x, m, table := newIndexing(t, ms)
	want, err := verify.ParseTable(table)
	if err != nil {
		t.Fatal(err)
	}
	for round, opens := range []int{1, 1, 1} {
		c, err := verify.Fetch(context.Background(), x, m.SnapshotID)
		if err != nil || len(c.Problems) > 0 {
			t.Fatalf("round %d: %v %v", round, err, c)
		}
		if x.opens != opens || x.noCopy != 1 {
			t.Fatalf("round %d: the table was read %d times, %d without a copy; want %d, 1 (the index is not used, or the table copied)", round, x.opens, x.noCopy, opens)
		}
		if !reflect.DeepEqual(c.Table.Members(), ms) {
			t.Fatalf("round %d: members differ from the table's", round)
		}
		if got, w := dumpTree(c.Table), dumpTree(want); !reflect.DeepEqual(got, w) {
			t.Fatalf("round %d: tree differs:\n%s\nwant\n%s", round, strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
		if l := x.logged(); len(l) > 0 {
			t.Fatalf("round %d: logged %q", round, l)
		}
	}
	fi, err := os.Stat(filepath.Join(x.dir, indexDirName(m)))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("index dir: %v %v", fi, err)
	}
}

func indexDirName(m *verify.Manifest) string {
	td, _ := m.Members.Digest()
	return fmt.Sprintf("%s.v%d", strings.TrimPrefix(string(td), "sha256:"), verify.IndexVersion)
}

// TestIndexChangedIsRebuilt: an index whose bytes were changed is never
// used: a changed header at open, a changed section at its first read.
// Either is said, removed and rebuilt from the table.
func TestIndexChangedIsRebuilt(t *testing.T) {
	for _, file := range []string{"header", "walk", "names", "open", "details", "strs", "of", "kids", "dirs"} {
		t.Run(file, func(t *testing.T) {
			ms := treeMembers()
			x, m, table := newIndexing(t, ms)
			want, _ := verify.ParseTable(table)
			if _, err := verify.Fetch(context.Background(), x, m.SnapshotID); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(x.dir, indexDirName(m), file)
			b, err := os.ReadFile(p)
			if err != nil || len(b) == 0 {
				t.Fatalf("%s: %d bytes, %v", file, len(b), err)
			}
			b[len(b)/2] ^= 1
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := verify.Fetch(context.Background(), x, m.SnapshotID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Table.Members(), ms) || !reflect.DeepEqual(dumpTree(c.Table), dumpTree(want)) {
				t.Fatalf("a changed %s served other members or another tree", file)
			}
			l := x.logged()
			if len(l) != 1 || !strings.Contains(l[0], "index") {
				t.Fatalf("logged %q, want one line about the index", l)
			}
			if x.opens != 2 {
				t.Fatalf("table read %d times, want 2 (read again for the changed index)", x.opens)
			}
			// The next Fetch has a good index again (rebuilt now, or removed
			// and rebuilt by this one).
			c, err = verify.Fetch(context.Background(), x, m.SnapshotID)
			if err != nil || !reflect.DeepEqual(c.Table.Members(), ms) {
				t.Fatal(err)
			}
			if l := x.logged(); len(l) > 0 {
				t.Fatalf("after the rebuild, logged %q", l)
			}
		})
	}
}

// TestIndexForeignIsIgnored: an intact index of another table, put under
// this table's name, is not used.
func TestIndexForeignIsIgnored(t *testing.T) {
	ms := treeMembers()
	x, m, _ := newIndexing(t, ms)
	other := append(treeMembers()[1:], casMember("zz"))
	y, om, _ := newIndexing(t, other)
	y.dir = x.dir
	if _, err := verify.Fetch(context.Background(), y, om.SnapshotID); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(x.dir, indexDirName(om)), filepath.Join(x.dir, indexDirName(m))); err != nil {
		t.Fatal(err)
	}
	c, err := verify.Fetch(context.Background(), x, m.SnapshotID)
	if err != nil || !reflect.DeepEqual(c.Table.Members(), ms) || x.opens != 1 {
		t.Fatalf("%v, %d opens", err, x.opens)
	}
	if l := x.logged(); len(l) != 1 || !strings.Contains(l[0], "index not used") {
		t.Fatalf("logged %q", l)
	}
}

// TestIndexCannotBeKept: a cache dir that cannot hold the index serves the
// table from memory and says so once; nothing is left behind.
func TestIndexCannotBeKept(t *testing.T) {
	ms := treeMembers()
	x, m, _ := newIndexing(t, ms)
	if err := os.WriteFile(x.dir, []byte("a file where the index dir goes"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c, err := verify.Fetch(context.Background(), x, m.SnapshotID)
		if err != nil || !reflect.DeepEqual(c.Table.Members(), ms) {
			t.Fatal(err)
		}
		if l := x.logged(); len(l) != 1 || !strings.Contains(l[0], "from memory") {
			t.Fatalf("logged %q", l)
		}
	}
	if b, _ := os.ReadFile(x.dir); !bytes.HasPrefix(b, []byte("a file")) {
		t.Fatal("the file was changed")
	}
}

// TestIndexOfTinyTables: tables of no member and of one are indexed and
// read back like the others.
func TestIndexOfTinyTables(t *testing.T) {
	for _, ms := range [][]verify.Member{{}, {casMember("only")}} {
		x, m, _ := newIndexing(t, ms)
		for round := range 2 {
			c, err := verify.Fetch(context.Background(), x, m.SnapshotID)
			if err != nil || c.Table.Len() != len(ms) || c.Table.Nodes() != len(ms) || c.Table.Dirs() != 1 {
				t.Fatalf("%d members, round %d: %v %+v", len(ms), round, err, c)
			}
		}
		if x.opens != 1 {
			t.Fatalf("%d members: table read %d times", len(ms), x.opens)
		}
	}
}
