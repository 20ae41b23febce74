package verify_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

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
