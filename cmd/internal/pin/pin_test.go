package pin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// writeTree creates files (path -> content) under a new temp dir.
func writeTree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func newPinner(t testing.TB) *Pinner {
	t.Helper()
	st, err := localstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rule, _ := ParseSplitRule("dir")
	return &Pinner{Store: st, Options: Options{Split: rule, Purpose: "test"}}
}

func TestDirPinIsDeterministicAndVerifiable(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 10000) // > one Bao group
	src := writeTree(t, map[string]string{
		"train/a.txt": "alpha", "val/b.txt": "beta", "notes.md": "n", "train/big.bin": big,
	})
	p := newPinner(t)
	ctx := context.Background()
	d1, err := p.Dir(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := p.Dir(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Fatalf("second pin of unchanged data: %s != %s", d2, d1)
	}
	snap, err := verify.Load(ctx, p.Store, d1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ split, content string }{
		"notes.md": {"", "n"}, "train/a.txt": {"train", "alpha"}, "train/big.bin": {"train", big}, "val/b.txt": {"val", "beta"},
	}
	if len(snap.Members()) != len(want) {
		t.Fatalf("got %d members, want %d", len(snap.Members()), len(want))
	}
	for _, m := range snap.Members() {
		w, ok := want[m.Path]
		if !ok {
			t.Fatalf("unexpected member %q", m.Path)
		}
		if m.Split != w.split || m.Size != int64(len(w.content)) || m.Digest != b3.Of([]byte(w.content)).String() || m.CAS != m.Digest {
			t.Errorf("member %+v does not describe %q", m, w.content)
		}
		got, err := p.Store.Get(ctx, verify.CASKey(strings.TrimPrefix(m.Digest, b3.Prefix)))
		if err != nil || string(got) != w.content {
			t.Errorf("%s: CAS holds %q (%v)", m.Path, got, err)
		}
	}
	// The big member has an outboard that verifies it.
	sum := b3.Of([]byte(big))
	ob, err := p.Store.Get(ctx, verify.OutboardKey(sum.Hex()))
	if err != nil {
		t.Fatal(err)
	}
	if err := b3.Verify(sum, ob, int64(len(big)), 0, []byte(big)); err != nil {
		t.Fatal(err)
	}
}

func TestDirPinChangesWithContentAndOptions(t *testing.T) {
	ctx := context.Background()
	p := newPinner(t)
	a, err := p.Dir(ctx, writeTree(t, map[string]string{"x": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Dir(ctx, writeTree(t, map[string]string{"x": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("different content, same digest")
	}
	p.Purpose = "other"
	p.Parents = []verify.Digest{a}
	c, err := p.Dir(ctx, writeTree(t, map[string]string{"x": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	if c == b {
		t.Fatal("different purpose and parents, same digest")
	}
	p.Parents = []verify.Digest{verify.SHA256([]byte("no such manifest"))}
	if _, err := p.Dir(ctx, writeTree(t, map[string]string{"x": "2"})); err == nil {
		t.Fatal("pin with a parent that is not in the store succeeded")
	}
}

func TestDirPinRefusesSymlinks(t *testing.T) {
	src := writeTree(t, map[string]string{"a": "1"})
	if err := os.Symlink("a", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	_, err := newPinner(t).Dir(context.Background(), src)
	if err == nil || !strings.Contains(err.Error(), "link") {
		t.Fatalf("symlink not refused: %v", err)
	}
}

// TestDirPinRefusesControlCharacters: a file name with a newline or an
// escape sequence would make a tree that misleads `find | xargs` and
// terminals; the pin refuses it and stores no manifest.
func TestDirPinRefusesControlCharacters(t *testing.T) {
	for _, name := range []string{"x\n", "a\x1b[2J", "del\x7f", "c1\u0085"} {
		src := writeTree(t, map[string]string{"ok": "1", name: "2"})
		p := newPinner(t)
		d, err := p.Dir(context.Background(), src)
		if err == nil || !strings.Contains(err.Error(), "unsafe path") {
			t.Errorf("%q: pin = %v, %v; want an unsafe path error", name, d, err)
		}
	}
}

func TestSplitRule(t *testing.T) {
	for _, tc := range []struct{ rule, path, split, policy string }{
		{"dir", "train/x", "train", "dir:test,train,val,validation"},
		{"dir", "validation/x", "validation", "dir:test,train,val,validation"},
		{"dir", "train", "", "dir:test,train,val,validation"},
		{"dir", "other/x", "", "dir:test,train,val,validation"},
		{"dir:b,a,a", "a/x", "a", "dir:a,b"},
		{"none", "train/x", "", "none"},
	} {
		r, err := ParseSplitRule(tc.rule)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Split(tc.path); got != tc.split {
			t.Errorf("%s.Split(%q) = %q, want %q", tc.rule, tc.path, got, tc.split)
		}
		if r.String() != tc.policy {
			t.Errorf("%s.String() = %q, want %q", tc.rule, r.String(), tc.policy)
		}
	}
	for _, bad := range []string{"regex:.*", "dir:", "dir:a,,b", "dir:a/b"} {
		if _, err := ParseSplitRule(bad); err == nil {
			t.Errorf("ParseSplitRule(%q) accepted", bad)
		}
	}
}
