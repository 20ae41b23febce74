package warm

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

func table(t *testing.T) *verify.Table {
	t.Helper()
	var ms []verify.Member
	for _, m := range []struct{ path, split string }{
		{"README", ""},
		{"train/a.bin", "train"},
		{"train/sub/b.bin", "train"},
		{"train2/c.bin", ""},
		{"val/d.bin", "val"},
	} {
		ms = append(ms, verify.Member{ID: m.path, Path: m.path, Split: m.split})
	}
	return verify.NewTable(ms)
}

func TestSelect(t *testing.T) {
	tb := table(t)
	for _, c := range []struct {
		paths []string
		split string
		want  []string
	}{
		{nil, "", []string{"README", "train/a.bin", "train/sub/b.bin", "train2/c.bin", "val/d.bin"}},
		{[]string{"/"}, "", []string{"README", "train/a.bin", "train/sub/b.bin", "train2/c.bin", "val/d.bin"}},
		{[]string{"train"}, "", []string{"train/a.bin", "train/sub/b.bin"}}, // not train2/
		{[]string{"/train/sub/"}, "", []string{"train/sub/b.bin"}},
		{[]string{"train/a.bin"}, "", []string{"train/a.bin"}},
		{[]string{"val", "README", "val/d.bin"}, "", []string{"README", "val/d.bin"}}, // each once, table order
		{nil, "train", []string{"train/a.bin", "train/sub/b.bin"}},
		{[]string{"train/sub", "val"}, "val", []string{"val/d.bin"}},
	} {
		sel, err := Select(tb, c.paths, c.split)
		if err != nil {
			t.Errorf("Select(%q, %q): %v", c.paths, c.split, err)
			continue
		}
		var got []string
		for _, i := range sel {
			got = append(got, tb.Path(i))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Select(%q, %q) = %q, want %q", c.paths, c.split, got, c.want)
		}
	}
}

func TestSelectRefuses(t *testing.T) {
	tb := table(t)
	for _, c := range []struct {
		paths []string
		split string
		names string
	}{
		{[]string{"nope"}, "", `"nope"`},
		{[]string{"train", "tra"}, "", `"tra"`}, // a prefix of a name is not a directory
		{[]string{"train/a.bin/x"}, "", `"train/a.bin/x"`},
		{nil, "test", `split "test"`},
		{[]string{"val"}, "train", `split "train"`},
	} {
		sel, err := Select(tb, c.paths, c.split)
		if !errors.Is(err, ErrSelection) || !strings.Contains(err.Error(), c.names) {
			t.Errorf("Select(%q, %q) = %v, %v; want an ErrSelection naming %s", c.paths, c.split, sel, err, c.names)
		}
	}
}

func TestSelectEmptySnapshot(t *testing.T) {
	sel, err := Select(verify.NewTable(nil), nil, "")
	if err != nil || len(sel) != 0 {
		t.Fatalf("Select of an empty snapshot = %v, %v", sel, err)
	}
}
