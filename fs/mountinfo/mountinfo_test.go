package mountinfo

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// line is one line of a mount table for a mount of fstype from source at
// point, escaped as the kernel does, with the given optional fields.
func line(minor, point, optional, fstype, source string) string {
	esc := strings.NewReplacer(" ", `\040`, "\t", `\011`, "\n", `\012`, `\`, `\134`)
	return "36 35 0:" + minor + " / " + esc.Replace(point) + " ro,nosuid,nodev " + optional + "- " +
		fstype + " " + esc.Replace(source) + " ro,user_id=0\n"
}

func TestParse(t *testing.T) {
	table := line("1", "/", "shared:1 ", "ext4", "/dev/sda1") +
		line("40", "/data", "shared:2 master:7 propagate_from:3 ", "tmpfs", "tmpfs") + // several optional fields
		line("41", "/data/a b", "", "tmpfs", "tmpfs") + // no optional field
		line("52", "/data/a b", "shared:3 ", "fuse.pinfs", "sha256:ab") + // mounted over the tmpfs
		line("53", "/data/a b/c", "shared:4 ", "fuse.pinfs", "sha256:cd") +
		line("54", "/data/d", "", "fuse.pinfs", "sha256:ef") +
		line("55", "/data/d", "", "tmpfs", "tmpfs") + // a tmpfs over the pinfs mount
		line("56", `/data/back\slash`, "", "fuse.pinfs", "my src") +
		"37 35 0:57 / /data/empty rw - tmpfs  rw\n" + // an empty source
		"39 35 0:59 / /data/nobody rw - fuse.pinfs sha256:ab rw,group_id=65534,user_id=65534,allow_other\n" +
		"short line\n" +
		"38 35 0:58 / /data/nosep rw shared:5 tmpfs tmpfs rw\n" // no "-": not a mount
	for _, tc := range []struct {
		dir                           string
		fstype, source, minor, userID string
		ok                            bool
	}{
		{"/", "ext4", "/dev/sda1", "1", "0", true},
		{"/data", "tmpfs", "tmpfs", "40", "0", true},
		{"/data/a b", "fuse.pinfs", "sha256:ab", "52", "0", true},
		{"/data/a b/c", "fuse.pinfs", "sha256:cd", "53", "0", true},
		{"/data/d", "tmpfs", "tmpfs", "55", "0", true},
		{`/data/back\slash`, "fuse.pinfs", "my src", "56", "0", true},
		{"/data/empty", "tmpfs", "", "57", "", true}, // no user_id=
		{"/data/nobody", "fuse.pinfs", "sha256:ab", "59", "65534", true},
		{`/data/a\040b`, "", "", "", "", false}, // the escaped form is not the path
		{"/data/a", "", "", "", "", false},
		{"/data/nosep", "", "", "", "", false},
		{"/data/e", "", "", "", "", false},
	} {
		e, ok, err := Parse(strings.NewReader(table), tc.dir)
		want := Entry{}
		if tc.ok {
			want = Entry{Point: tc.dir, FSType: tc.fstype, Source: tc.source, Minor: tc.minor, UserID: tc.userID}
		}
		if err != nil || ok != tc.ok || e != want {
			t.Errorf("Parse(%q) = %+v %v %v, want %+v %v", tc.dir, e, ok, err, want, tc.ok)
		}
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/a\040b`:   "/a b",
		`/a\134b`:   `/a\b`,
		`/a\011`:    "/a\t",
		`/a\012b`:   "/a\nb",
		`/a\04`:     `/a\04`, // too short: left alone
		`/a\0`:      `/a\0`,
		`/a\09x`:    `/a\09x`,
		`/a\999`:    `/a\999`,
		`/a\400`:    `/a\400`, // not a byte
		`/plain`:    "/plain",
		`\040\040x`: "  x",
		`\`:         `\`,
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAtFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "mountinfo")
	if err := os.WriteFile(p, []byte(line("71", "/m/x", "shared:600 ", "fuse.pinfs", "sha256:ab")), 0o600); err != nil {
		t.Fatal(err)
	}
	if e, ok, err := AtFile(p, "/m/x"); err != nil || !ok || e.FSType != "fuse.pinfs" || e.Minor != "71" {
		t.Errorf("AtFile of a listed mount = %+v %v %v", e, ok, err)
	}
	if e, ok, err := AtFile(filepath.Join(dir, "missing"), "/m/x"); !errors.Is(err, fs.ErrNotExist) || ok || e != (Entry{}) {
		t.Errorf("AtFile of a missing table = %+v %v %v, want fs.ErrNotExist", e, ok, err)
	}
}

func TestAtReadsTheRealTable(t *testing.T) {
	if _, err := os.Stat(Self); err != nil {
		t.Skipf("no %s here: %v", Self, err)
	}
	e, ok := At("/")
	if !ok || e.Point != "/" || e.FSType == "" {
		t.Errorf("At(/) = %+v %v, want the root mount", e, ok)
	}
	if e, ok := At(filepath.Join(t.TempDir(), "none")); ok {
		t.Errorf("At of a plain path = %+v, want no mount", e)
	}
}

func TestCanonicalResolvesTheParentOnly(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	realDir, _ := filepath.EvalSymlinks(dir)
	if got, want := Canonical(filepath.Join(dir, "link", "m")), filepath.Join(realDir, "real", "m"); got != want {
		t.Errorf("Canonical through a linked parent = %q, want %q", got, want)
	}
	// The last element is not followed: it may be a dead mount.
	if got, want := Canonical(filepath.Join(dir, "link")), filepath.Join(realDir, "link"); got != want {
		t.Errorf("Canonical of a link itself = %q, want %q", got, want)
	}
	if got := Canonical("/"); got != "/" {
		t.Errorf("Canonical(/) = %q", got)
	}
	wd, _ := os.Getwd()
	realWd, _ := filepath.EvalSymlinks(wd)
	if got, want := Canonical("rel"), filepath.Join(realWd, "rel"); got != want {
		t.Errorf("Canonical of a relative path = %q, want %q", got, want)
	}
}

// FuzzParse checks that no table makes Parse panic, and that a mount it
// finds is at the dir asked for.
func FuzzParse(f *testing.F) {
	f.Add(line("52", "/a b", "shared:1 ", "fuse.pinfs", "sha256:ab"), "/a b")
	f.Add("1 2 3 4 5 6 - \\\n", "5")
	f.Add("1 2 3 4 /x 6 7 8 9 -", "/x")
	f.Fuzz(func(t *testing.T, table, dir string) {
		e, ok, _ := Parse(strings.NewReader(table), dir)
		if ok && e.Point != dir {
			t.Errorf("Parse(%q, %q) = %+v", table, dir, e)
		}
	})
}

func TestAllKeepsOrderAndUnescapes(t *testing.T) {
	table := filepath.Join(t.TempDir(), "mountinfo")
	lines := "22 1 0:21 / / rw - ext4 /dev/sda1 rw\n" +
		"short line\n" +
		"36 22 0:52 / /mnt/a\\040b ro shared:1 - fuse.pinfs sha256:ab ro\n" +
		"37 36 0:53 / /mnt/a\\040b/c ro - tmpfs none rw\n"
	if err := os.WriteFile(table, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	all, err := All(table)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range all {
		got = append(got, e.Point+" "+e.FSType)
	}
	want := []string{"/ ext4", "/mnt/a b fuse.pinfs", "/mnt/a b/c tmpfs"}
	if !slices.Equal(got, want) {
		t.Errorf("All = %q, want %q", got, want)
	}
	if _, err := All(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("All of a missing table: no error")
	}
}
