package verify_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"github.com/pinfs/pinfs/verify"
)

// kindAt is the part of a Problem that the checks promise: its kind and
// the member it is about.
type kindAt struct{ Kind, Path string }

func kinds(ps []verify.Problem) []kindAt {
	var ks []kindAt
	for _, p := range ps {
		ks = append(ks, kindAt{p.Kind, p.Path})
	}
	return ks
}

func TestCheckMembersGood(t *testing.T) {
	ms := []verify.Member{
		casMember("a"), s3Member("a.b/c"), s3Member("ab/c"), casMember("b/c/d"), s3Member("b/c/e"),
	}
	if ps := verify.CheckMembers(ms); len(ps) != 0 {
		t.Fatalf("problems in a good table: %v", ps)
	}
	if ps := verify.CheckMembers(nil); len(ps) != 0 {
		t.Fatalf("problems in an empty table: %v", ps)
	}
	empty := []verify.Member{
		{ID: "e", Path: "e", Size: 0, Digest: b3Empty, CAS: b3Empty},
		{ID: "f", Path: "f", Size: 0, Digest: b3Empty, S3: &verify.S3Source{Bucket: "b", Key: "f", VersionID: "v"}},
	}
	if ps := verify.CheckMembers(empty); len(ps) != 0 {
		t.Fatalf("problems in empty members with the digest of no bytes: %v", ps)
	}
}

// TestCheckRefusesHandMadeTable: a member table written by hand (not by
// EncodeMembers) whose path hides a newline, or whose empty member claims
// the digest of other bytes, parses, matches its manifest, and is refused
// by the member checks, so no Snapshot can be made of it.
func TestCheckRefusesHandMadeTable(t *testing.T) {
	for _, tc := range []struct {
		name, line, kind, path string
	}{
		{"newline", `{"digest":"` + b3Hello + `","id":"x\n/etc/shadow","path":"x\n/etc/shadow","s3":{"bucket":"data","key":"x\n/etc/shadow","versionId":"v1"},"size":5}`,
			verify.KindUnsafePath, "x\n/etc/shadow"},
		{"escape", `{"cas":"` + b3World + `","digest":"` + b3World + `","id":"a","path":"a\u001b[2Jb","size":5}`,
			verify.KindUnsafePath, "a\x1b[2Jb"},
		{"C1", "{\"cas\":\"" + b3World + "\",\"digest\":\"" + b3World + "\",\"id\":\"a\",\"path\":\"a\u009bb\",\"size\":5}",
			verify.KindUnsafePath, "a\u009bb"},
		{"empty member", `{"cas":"` + b3Hello + `","digest":"` + b3Hello + `","id":"e","path":"e","size":0}`,
			verify.KindBadMember, "e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := []byte(tc.line + "\n")
			tab, err := verify.ParseTable(table)
			if err != nil {
				t.Fatalf("ParseTable: %v", err)
			}
			if got := kinds(tab.Check()); !reflect.DeepEqual(got, []kindAt{{tc.kind, tc.path}}) {
				t.Fatalf("Check() = %v, want %s for %q", tab.Check(), tc.kind, tc.path)
			}
			_, mb, encoded := buildSnapshot(t, tab.Members(), nil)
			if !bytes.Equal(encoded, table) {
				t.Fatalf("the manifest names %q, not the hand-made table", encoded)
			}
			c, err := verify.Check(digestOf(t, mb), mb, table)
			if err != nil {
				t.Fatal(err)
			}
			if s, err := c.Snapshot(); s != nil || !errors.Is(err, verify.ErrInvalid) || !strings.Contains(err.Error(), tc.kind) {
				t.Fatalf("Snapshot() = %v, %v; want an ErrInvalid naming %s", s, err, tc.kind)
			}
		})
	}
}

// TestCheckMembersKinds builds a minimal bad table for each problem kind
// and checks that exactly that problem is reported, for the right member.
func TestCheckMembersKinds(t *testing.T) {
	with := func(path string, f func(m *verify.Member)) verify.Member {
		m := s3Member(path)
		f(&m)
		return m
	}
	withCAS := func(path string, f func(m *verify.Member)) verify.Member {
		m := casMember(path)
		f(&m)
		return m
	}
	for _, tc := range []struct {
		name string
		ms   []verify.Member
		want []kindAt
	}{
		{"duplicate id", []verify.Member{
			with("a", func(m *verify.Member) { m.ID = "x"; m.Split = "train" }),
			with("b", func(m *verify.Member) { m.ID = "x"; m.Split = "val" }),
		}, []kindAt{{verify.KindDuplicateID, "b"}}},
		{"duplicate id, same split", []verify.Member{
			with("a", func(m *verify.Member) { m.ID = "x" }),
			with("b", func(m *verify.Member) { m.ID = "x" }),
			with("c", func(m *verify.Member) { m.ID = "x" }),
		}, []kindAt{{verify.KindDuplicateID, "b"}, {verify.KindDuplicateID, "c"}}},
		{"file and directory", []verify.Member{s3Member("a"), s3Member("a/b")},
			[]kindAt{{verify.KindUnsafePath, "a/b"}}},
		{"file and deeper directory", []verify.Member{casMember("a/b"), casMember("a/b/c/d")},
			[]kindAt{{verify.KindUnsafePath, "a/b/c/d"}}},
		{"duplicate path", []verify.Member{s3Member("a"), with("a", func(m *verify.Member) { m.ID = "other" })},
			[]kindAt{{verify.KindUnsafePath, "a"}}},
		{"unsafe path", []verify.Member{s3Member("../etc/passwd")},
			[]kindAt{{verify.KindUnsafePath, "../etc/passwd"}}},
		{"absolute path", []verify.Member{casMember("/a")},
			[]kindAt{{verify.KindUnsafePath, "/a"}}},
		{"newline in path", []verify.Member{s3Member("x\n/etc/shadow")},
			[]kindAt{{verify.KindUnsafePath, "x\n/etc/shadow"}}},
		{"carriage return in path", []verify.Member{casMember("a\rb")},
			[]kindAt{{verify.KindUnsafePath, "a\rb"}}},
		{"escape in path", []verify.Member{s3Member("a/\x1b]0;title\x07")},
			[]kindAt{{verify.KindUnsafePath, "a/\x1b]0;title\x07"}}},
		{"C0 control in path", []verify.Member{casMember("a\x01")},
			[]kindAt{{verify.KindUnsafePath, "a\x01"}}},
		{"DEL in path", []verify.Member{s3Member("a\x7f")},
			[]kindAt{{verify.KindUnsafePath, "a\x7f"}}},
		{"C1 control in path", []verify.Member{s3Member("a\u009b2J")},
			[]kindAt{{verify.KindUnsafePath, "a\u009b2J"}}},
		{"control in a later path", []verify.Member{s3Member("a"), casMember("b\nc")},
			[]kindAt{{verify.KindUnsafePath, "b\nc"}}},
		{"version id null", []verify.Member{with("a", func(m *verify.Member) { m.S3.VersionID = "null" })},
			[]kindAt{{verify.KindUnversioned, "a"}}},
		{"version id empty", []verify.Member{with("a", func(m *verify.Member) { m.S3.VersionID = "" })},
			[]kindAt{{verify.KindUnversioned, "a"}}},
		{"cas differs from digest", []verify.Member{withCAS("a", func(m *verify.Member) { m.CAS = b3Hello })},
			[]kindAt{{verify.KindBadMember, "a"}}},
		{"both sources", []verify.Member{with("a", func(m *verify.Member) { m.CAS = m.Digest })},
			[]kindAt{{verify.KindBadMember, "a"}}},
		{"no source", []verify.Member{withCAS("a", func(m *verify.Member) { m.CAS = "" })},
			[]kindAt{{verify.KindBadMember, "a"}}},
		{"empty id", []verify.Member{with("a", func(m *verify.Member) { m.ID = "" })},
			[]kindAt{{verify.KindBadMember, "a"}}},
		{"empty member, digest of other bytes", []verify.Member{with("a", func(m *verify.Member) { m.Size = 0 })},
			[]kindAt{{verify.KindBadMember, "a"}}},
		{"empty cas member, digest of other bytes", []verify.Member{withCAS("a", func(m *verify.Member) { m.Size = 0 })},
			[]kindAt{{verify.KindBadMember, "a"}}},
		{"bad digest", []verify.Member{with("a", func(m *verify.Member) { m.Digest = "blake3:" + strings.ToUpper(b3Hello[7:]) })},
			[]kindAt{{verify.KindBadMember, "a"}}},
		{"sha256 digest", []verify.Member{with("a", func(m *verify.Member) { m.Digest = "sha256:" + b3Hello[7:] })},
			[]kindAt{{verify.KindBadMember, "a"}}},
		{"s3 without bucket", []verify.Member{with("a", func(m *verify.Member) { m.S3.Bucket = "" })},
			[]kindAt{{verify.KindBadMember, "a"}}},
		{"s3 without key", []verify.Member{with("a", func(m *verify.Member) { m.S3.Key = "" })},
			[]kindAt{{verify.KindBadMember, "a"}}},
		{"problems in table order", []verify.Member{
			with("a", func(m *verify.Member) { m.S3.VersionID = "null" }),
			casMember("b"),
			withCAS("c", func(m *verify.Member) { m.CAS = "" }),
		}, []kindAt{{verify.KindUnversioned, "a"}, {verify.KindBadMember, "c"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := verify.CheckMembers(tc.ms)
			if got := kinds(ps); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("problems %v, want %v", ps, tc.want)
			}
			for _, p := range ps {
				if p.Detail == "" || !strings.Contains(p.String(), p.Kind) {
					t.Errorf("problem %#v has no detail or a bad String", p)
				}
				// pinfs verify prints String to a terminal.
				if strings.ContainsFunc(p.String(), unicode.IsControl) {
					t.Errorf("problem String %q holds a control character", p.String())
				}
			}
		})
	}
}

// TestSnapshotRefusesProblems: a checked table with problems yields no
// Snapshot, only an error that names the problems and wraps ErrInvalid.
func TestSnapshotRefusesProblems(t *testing.T) {
	bad := s3Member("a")
	bad.S3.VersionID = "null"
	ms := []verify.Member{bad, casMember("b")}
	_, mb, table := buildSnapshot(t, ms, nil)
	c, err := verify.Check(verify.SHA256(nil), mb, table)
	if err == nil {
		t.Fatal("Check accepted a manifest under the wrong digest")
	}
	d := digestOf(t, mb)
	c, err = verify.Check(d, mb, table)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(c.Problems); !reflect.DeepEqual(got, []kindAt{{verify.KindUnversioned, "a"}}) {
		t.Fatalf("problems %v", c.Problems)
	}
	s, err := c.Snapshot()
	if s != nil || !errors.Is(err, verify.ErrInvalid) || !strings.Contains(err.Error(), verify.KindUnversioned) {
		t.Fatalf("Snapshot() = %v, %v; want an ErrInvalid naming %s", s, err, verify.KindUnversioned)
	}
}
