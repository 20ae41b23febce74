package verify_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pinfs/pinfs/verify"
)

func TestCheckPath(t *testing.T) {
	long := strings.Repeat("x", verify.MaxNameLen)
	for _, p := range []string{
		"a", "a/b", "a/b/c.txt", "train/0001.jpg",
		".a", "..a", "a..", "a/.b", "...", "a/...", ".hidden/..x",
		"a b", "a\\b", "-", "~", "a:b", "a\nb", "a\x7fb",
		"é/ü", "日本語/ファイル.txt", "😀", "a/😀/b", "\u200b", "\ufeff",
		long, "a/" + long + "/b",
		strings.Repeat("日", 85), // 255 bytes
	} {
		if err := verify.CheckPath(p); err != nil {
			t.Errorf("CheckPath(%q) = %v, want nil", p, err)
		}
	}
	for _, p := range []string{
		"", "/", "/a", "//a", "a//b", "a/", "a/b/",
		".", "./a", "a/.", "a/./b",
		"..", "../a", "a/..", "a/../b",
		"a\x00b", "\x00",
		"\xff", "a/\xc3", "\xed\xa0\x80", "\xc0\xaf",
		long + "x", "a/" + long + "x",
		strings.Repeat("日", 86), // 258 bytes
	} {
		if err := verify.CheckPath(p); !errors.Is(err, verify.ErrUnsafePath) {
			t.Errorf("CheckPath(%q) = %v, want ErrUnsafePath", p, err)
		}
	}
}

// safePath is an independent statement of the path rule: what io/fs calls
// a valid path (unrooted, UTF-8, no empty, "." or ".." element), except the
// root ".", with no NUL and no element over MaxNameLen bytes.
func safePath(p string) bool {
	if !fs.ValidPath(p) || p == "." || strings.Contains(p, "\x00") {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if len(c) > verify.MaxNameLen {
			return false
		}
	}
	return true
}

// FuzzCheckPath checks CheckPath against safePath and re-checks the
// invariants of an accepted path byte by byte.
func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"a/b", "", "/a", "a//b", "a/", "./a", "a/..", "a\x00b", "\xff", "é/😀", strings.Repeat("x", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := verify.CheckPath(p)
		if (err == nil) != safePath(p) {
			t.Fatalf("CheckPath(%q) = %v, but io/fs-based rule says safe=%v", p, err, safePath(p))
		}
		if err != nil {
			if !errors.Is(err, verify.ErrUnsafePath) {
				t.Fatalf("CheckPath(%q) = %v, does not wrap ErrUnsafePath", p, err)
			}
			return
		}
		if p == "" || p[0] == '/' || p[len(p)-1] == '/' || !utf8.ValidString(p) {
			t.Fatalf("accepted %q", p)
		}
		start := 0
		for i := 0; i <= len(p); i++ {
			if i < len(p) && p[i] != '/' {
				if p[i] == 0 {
					t.Fatalf("accepted %q with NUL", p)
				}
				continue
			}
			c := p[start:i]
			if c == "" || c == "." || c == ".." || len(c) > verify.MaxNameLen {
				t.Fatalf("accepted %q with component %q", p, c)
			}
			start = i + 1
		}
	})
}
