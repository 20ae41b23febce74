package verify_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/pinfs/pinfs/verify"
)

func TestCheckPath(t *testing.T) {
	long := strings.Repeat("x", verify.MaxNameLen)
	for _, p := range []string{
		"a", "a/b", "a/b/c.txt", "train/0001.jpg",
		".a", "..a", "a..", "a/.b", "...", "a/...", ".hidden/..x",
		"a b", "a\\b", "-", "~", "a:b", "a\u00a0b", "a/\u00a0", "\u00ff", "\u0100",
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
		// Control characters: C0 (NUL above, \t \n \r ESC and the rest),
		// DEL, and C1 (U+0080..U+009F, CSI U+009B among them).
		"a\nb", "x\n/etc/shadow", "a/b\n", "a\rb", "a\tb", "\x1b[31mred", "a\x01", "a\x1f",
		"a\x7fb", "\x7f", "a\u0080b", "a/\u009b31m", "\u009f", "a\u0085b",
		"\xff", "a/\xc3", "\xed\xa0\x80", "\xc0\xaf",
		long + "x", "a/" + long + "x",
		strings.Repeat("日", 86), // 258 bytes
	} {
		if err := verify.CheckPath(p); !errors.Is(err, verify.ErrUnsafePath) {
			t.Errorf("CheckPath(%q) = %v, want ErrUnsafePath", p, err)
		}
	}
}

// TestCheckPathControls refuses every C0 control, DEL and every C1
// control in any position of a path, and accepts the characters next to
// them (space, U+00A0).
func TestCheckPathControls(t *testing.T) {
	var controls []rune
	for r := rune(0); r < 0x20; r++ {
		controls = append(controls, r)
	}
	controls = append(controls, 0x7f)
	for r := rune(0x80); r < 0xa0; r++ {
		controls = append(controls, r)
	}
	for _, r := range controls {
		c := string(r)
		for _, p := range []string{c, "a" + c, c + "b", "a/" + c, "a" + c + "/b", "a/b" + c + "c"} {
			if err := verify.CheckPath(p); !errors.Is(err, verify.ErrUnsafePath) {
				t.Errorf("CheckPath(%q) = %v, want ErrUnsafePath", p, err)
			}
		}
	}
	for _, r := range []rune{' ', '~', 0xa0, 0xad} {
		if err := verify.CheckPath("a" + string(r) + "b"); err != nil {
			t.Errorf("CheckPath(%q) = %v, want nil", "a"+string(r)+"b", err)
		}
	}
}

// safePath is an independent statement of the path rule: what io/fs calls
// a valid path (unrooted, UTF-8, no empty, "." or ".." element), except the
// root ".", with no control character (unicode.IsControl: C0, DEL, C1) and
// no element over MaxNameLen bytes.
func safePath(p string) bool {
	if !fs.ValidPath(p) || p == "." || strings.ContainsFunc(p, unicode.IsControl) {
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
	for _, s := range []string{"a/b", "", "/a", "a//b", "a/", "./a", "a/..", "a\x00b", "\xff", "é/😀", strings.Repeat("x", 256),
		"x\n/etc/shadow", "a\rb", "\x1b[2J", "a\x7f", "a\u0085", "\u009b0m", "a\u00a0"} {
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
				if p[i] < 0x20 || p[i] == 0x7f {
					t.Fatalf("accepted %q with control byte %#x", p, p[i])
				}
				// C1 controls U+0080..U+009F are 0xc2 0x80..0x9f in UTF-8.
				if p[i] == 0xc2 && i+1 < len(p) && p[i+1] < 0xa0 {
					t.Fatalf("accepted %q with C1 control at %d", p, i)
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

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"a/b": "a/b", "é 日本語\u00a0": "é 日本語\u00a0", "": "",
		"x\n/etc/shadow": `"x\n/etc/shadow"`, "\x1b[2J": `"\x1b[2J"`, "a\x7f": `"a\x7f"`, "a\u009bb": `"a\u009bb"`,
	} {
		if got := verify.Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}
