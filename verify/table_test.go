package verify_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"unicode"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// parseMembersJSON is the reference for ParseTable: the general JSON
// decoder, then "the line is exactly what AppendCanonical makes of it"
// (ParseMembers before it had its own scanner).
func parseMembersJSON(table []byte) ([]verify.Member, error) {
	var ms []verify.Member
	for line := 1; len(table) > 0; line++ {
		i := bytes.IndexByte(table, '\n')
		if i < 0 {
			return nil, fmt.Errorf("line %d: no newline", line)
		}
		raw := table[:i]
		table = table[i+1:]
		var m verify.Member
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		if _, err := verify.EncodeMembers([]verify.Member{m}); err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		if !bytes.Equal(m.AppendCanonical(nil), raw) {
			return nil, fmt.Errorf("line %d: not canonical", line)
		}
		if len(ms) > 0 && ms[len(ms)-1].Path >= m.Path {
			return nil, fmt.Errorf("line %d: unsorted", line)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// checkMembersRef is the reference for CheckMembers: sets of all paths
// and ids (CheckMembers before it checked in path order).
func checkMembersRef(ms []verify.Member) []verify.Problem {
	var ps []verify.Problem
	add := func(kind string, m *verify.Member, format string, a ...any) {
		ps = append(ps, verify.Problem{Kind: kind, Path: m.Path, ID: m.ID, Detail: fmt.Sprintf(format, a...)})
	}
	ids := map[string]string{}
	files := map[string]bool{}
	for i := range ms {
		files[ms[i].Path] = true
	}
	seen := map[string]bool{}
	for i := range ms {
		m := &ms[i]
		if err := verify.CheckPath(m.Path); err != nil {
			add(verify.KindUnsafePath, m, "%v", err)
		} else if seen[m.Path] {
			add(verify.KindUnsafePath, m, "path used by an earlier member")
		} else {
			for j := range len(m.Path) {
				if m.Path[j] == '/' && files[m.Path[:j]] {
					add(verify.KindUnsafePath, m, "parent %q is also a file", m.Path[:j])
					break
				}
			}
		}
		seen[m.Path] = true
		if m.ID == "" {
			add(verify.KindBadMember, m, "empty id")
		} else if split, dup := ids[m.ID]; dup {
			add(verify.KindDuplicateID, m, "id %q already used (split %q, this one %q)", m.ID, split, m.Split)
		} else {
			ids[m.ID] = m.Split
		}
		if sum, err := b3.Parse(m.Digest); err != nil {
			add(verify.KindBadMember, m, "%v", err)
		} else if empty := b3.Of(nil); m.Size == 0 && sum != empty {
			add(verify.KindBadMember, m, "size 0, but digest %s is not the BLAKE3 of no bytes (%s)", sum, empty)
		}
		switch {
		case m.S3 != nil && m.CAS != "":
			add(verify.KindBadMember, m, "both an s3 and a cas source")
		case m.S3 != nil:
			if m.S3.Bucket == "" || m.S3.Key == "" {
				add(verify.KindBadMember, m, "s3 source without bucket or key")
			}
			if v := m.S3.VersionID; v == "" || v == "null" {
				add(verify.KindUnversioned, m, "s3://%s/%s has no real version id (%q)", m.S3.Bucket, m.S3.Key, v)
			}
		case m.CAS != "":
			if m.CAS != m.Digest {
				add(verify.KindBadMember, m, "cas address %s differs from digest %s", m.CAS, m.Digest)
			}
		default:
			add(verify.KindBadMember, m, "no source")
		}
	}
	return ps
}

// oddMembers are members that take every path of the compact form: ids
// that are not their path, digests and CAS addresses that are not
// canonical, keys that do not end in the path, ETags that are not a
// quoted MD5, empty and escaped strings.
func oddMembers() []verify.Member {
	ms := []verify.Member{
		casMember("a"), s3Member("a b/\"c\""),
		{ID: "x\x00", Path: "b", Size: 1<<53 - 1, Digest: b3Empty, CAS: b3Empty},
		s3Member("é/😀"),
		{ID: "", Path: "", Digest: "", Size: 0},
		{ID: "id", Path: "c", Digest: "blake3:" + strings.ToUpper(b3Hello[7:]), CAS: "blake3:" + strings.ToUpper(b3Hello[7:])},
		{ID: "id2", Path: "d", Digest: b3Hello, CAS: b3World},
		{ID: "d2", Path: "d2", Digest: "sha256:x", CAS: "sha256:y", Split: "weird\nsplit"},
		{ID: "e", Path: "e", Digest: b3Hello, S3: &verify.S3Source{}},
		{ID: "f", Path: "f", Digest: b3Hello, S3: &verify.S3Source{Bucket: "b", Key: "other", VersionID: "null", ETag: `"ABCDEF0123456789abcdef0123456789"`}},
		{ID: "g", Path: "g", Digest: b3Hello, S3: &verify.S3Source{Bucket: "b", Key: "g", VersionID: "v", ETag: `"0123456789abcdef0123456789abcdef-2"`}},
		{ID: "h", Path: "h", Digest: b3Hello, CAS: b3Hello, S3: &verify.S3Source{Bucket: "b", Key: "x/h", VersionID: "v", ETag: `"0123456789abcdef0123456789abcdef"`}},
		{ID: "i", Path: "i", Digest: b3Hello, S3: &verify.S3Source{Bucket: "b\\", Key: "\t", VersionID: "\u2028"}},
	}
	for i, s := range tricky {
		m := s3Member("")
		m.ID, m.Path, m.Split = s+"#id", "p"+s+string(rune('a'+i)), s
		m.S3.Key, m.S3.VersionID, m.S3.ETag = s, s+"v", s
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b verify.Member) int { return strings.Compare(a.Path, b.Path) })
	return ms
}

func TestTableAccessors(t *testing.T) {
	ms := oddMembers()
	for name, tab := range map[string]*verify.Table{"NewTable": verify.NewTable(ms), "ParseTable": parseTable(t, encode(t, ms))} {
		if tab.Len() != len(ms) {
			t.Fatalf("%s: Len %d, want %d", name, tab.Len(), len(ms))
		}
		if got := tab.Members(); !reflect.DeepEqual(got, ms) {
			t.Fatalf("%s: members\n got %+v\nwant %+v", name, got, ms)
		}
		for i := range ms {
			m := &ms[i]
			sum, ok := tab.Sum(i)
			want, err := b3.Parse(m.Digest)
			if tab.Path(i) != m.Path || tab.ID(i) != m.ID || tab.Split(i) != m.Split || tab.Size(i) != m.Size ||
				tab.Digest(i) != m.Digest || ok != (err == nil) || sum != want {
				t.Errorf("%s: member %d: accessors disagree with %+v", name, i, m)
			}
			version, s3 := tab.Version(i)
			if wantS3 := m.S3 != nil; s3 != wantS3 || (s3 && version != m.S3.VersionID) || (!s3 && version != "") {
				t.Errorf("%s: member %d: Version = %q, %t; want the S3 source's of %+v", name, i, version, s3, m)
			}
			if got := string(tab.AppendDigest([]byte("x"), i)); got != "x"+m.Digest {
				t.Errorf("%s: member %d: AppendDigest = %q, want x%s", name, i, got, m.Digest)
			}
			if got := string(tab.AppendCAS([]byte("x"), i)); got != "x"+m.CAS {
				t.Errorf("%s: member %d: AppendCAS = %q, want x%s", name, i, got, m.CAS)
			}
		}
	}
}

func parseTable(t testing.TB, table []byte) *verify.Table {
	t.Helper()
	tab, err := verify.ParseTable(table)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// TestTableInternOverflow: more distinct buckets, splits and key prefixes
// than a Table interns are kept as text.
func TestTableInternOverflow(t *testing.T) {
	var ms []verify.Member
	for i := range 70_000 {
		m := s3Member(fmt.Sprintf("p%06d", i))
		m.Split = fmt.Sprintf("s%d", i)
		m.S3.Bucket = fmt.Sprintf("b%d", i)
		m.S3.Key = fmt.Sprintf("k%d/", i) + m.Path
		ms = append(ms, m)
	}
	for name, tab := range map[string]*verify.Table{"NewTable": verify.NewTable(ms), "ParseTable": parseTable(t, encode(t, ms))} {
		if got := tab.Members(); !reflect.DeepEqual(got, ms) {
			t.Fatalf("%s: members differ", name)
		}
	}
}

// TestParseTableChunks parses a table large enough to be split into
// chunks: errors are reported at their line of the whole table, and
// paths must increase across chunk boundaries too.
func TestParseTableChunks(t *testing.T) {
	defer verify.SetMinChunk(4 << 10)()
	const n = 400
	_, _, table := verifytest.Table(n, verifytest.S3, 7)
	if len(table) < 32<<10 {
		t.Fatalf("table of %d bytes is too small to be split", len(table))
	}
	want := verifytest.Members(n, verifytest.S3, 7)
	lines := bytes.SplitAfter(table, []byte("\n"))
	lines = lines[:len(lines)-1]
	join := func(ls [][]byte) []byte { return bytes.Join(ls, nil) }
	for name, parse := range tableParsers {
		tab, err := parse(table)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := tab.Members(); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: parsed members differ from the generated ones", name)
		}
		// Every line boundary is a chunk boundary for some k.
		for k := range n - 1 {
			bad := slices.Clone(lines)
			bad[k], bad[k+1] = bad[k+1], bad[k]
			if _, err := parse(join(bad)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line %d: path", k+2)) {
				t.Errorf("%s: lines %d and %d swapped: error %v", name, k+1, k+2, err)
			}
		}
		for _, k := range []int{0, 1, n / 3, n / 2, n - 1} {
			bad := slices.Clone(lines)
			bad[k] = []byte(strings.Replace(string(bad[k]), `"size":`, `"size": `, 1))
			if _, err := parse(join(bad)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line %d: not", k+1)) {
				t.Errorf("%s: line %d not canonical: error %v", name, k+1, err)
			}
		}
		if _, err := parse(table[:len(table)-1]); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line %d: no newline", n)) {
			t.Errorf("%s: missing last newline: error %v", name, err)
		}
	}
}

// tableParsers parse a table from bytes, and streamed in reads of
// varying size.
var tableParsers = map[string]func([]byte) (*verify.Table, error){
	"bytes": verify.ParseTable,
	"stream": func(b []byte) (*verify.Table, error) {
		return verify.ParseTableFrom(iotest.HalfReader(bytes.NewReader(b)))
	},
}

// TestCheckMatchesReference compares CheckMembers with the set-based
// reference on random tables with duplicate and conflicting paths and
// ids, sorted and unsorted.
func TestCheckMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	comps := []string{"a", "b", "a.b", "a-b", "..", "", "a b", "é", "a\nb", "\x1b", "\u009b"}
	for round := range 300 {
		var ms []verify.Member
		for range 1 + rng.IntN(30) {
			var cs []string
			for range 1 + rng.IntN(3) {
				cs = append(cs, comps[rng.IntN(len(comps))])
			}
			p := strings.Join(cs, "/")
			var m verify.Member
			if rng.IntN(2) == 0 {
				m = s3Member(p)
			} else {
				m = casMember(p)
			}
			switch rng.IntN(4) {
			case 0:
				m.ID = comps[rng.IntN(len(comps))]
			case 1:
				m.Split = comps[rng.IntN(3)]
			case 2:
				m.Size = 0
				if rng.IntN(2) == 0 {
					m.Digest = b3Empty
					if m.CAS != "" {
						m.CAS = b3Empty
					}
				}
			}
			ms = append(ms, m)
		}
		if round%2 == 0 {
			slices.SortStableFunc(ms, func(a, b verify.Member) int { return strings.Compare(a.Path, b.Path) })
		}
		got, want := verify.CheckMembers(ms), checkMembersRef(ms)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d, members %+v:\n got %v\nwant %v", round, ms, got, want)
		}
	}
}

// FuzzParseTable checks ParseTable against the reference parser: both
// accept the same tables, with the same members, and the checks agree.
func FuzzParseTable(f *testing.F) {
	table := encode(f, oddMembers())
	f.Add(table)
	for _, l := range bytes.SplitAfter(table, []byte("\n")) {
		f.Add(l)
	}
	f.Add([]byte(`{"digest":"x","id":"\u0041","path":"a","size":1}` + "\n"))
	f.Add([]byte(`{"digest":"x","id":"\u001f\u0000\t","path":"a","size":0}` + "\n"))
	f.Add([]byte(`{"cas":"y","digest":"x","id":"","path":"a","size":10}` + "\n"))
	f.Add([]byte(`{"cas":"` + b3World + `","digest":"` + b3World + `","id":"x","path":"x\n/etc/shadow","size":5}` + "\n"))
	f.Add([]byte(`{"cas":"` + b3Empty + `","digest":"` + b3Empty + `","id":"e","path":"e","size":0}` + "\n"))
	f.Add([]byte(`{"cas":"` + b3Hello + `","digest":"` + b3Hello + `","id":"e","path":"e","size":0}` + "\n"))
	// Chunks of a few lines, so that chunk boundaries and lines longer
	// than a read buffer are fuzzed too.
	defer verify.SetMinChunk(64)()
	f.Fuzz(func(t *testing.T, table []byte) {
		tab, err := verify.ParseTable(table)
		stab, serr := verify.ParseTableFrom(iotest.OneByteReader(bytes.NewReader(table)))
		if fmt.Sprint(err) != fmt.Sprint(serr) || err == nil && !reflect.DeepEqual(tab.Members(), stab.Members()) {
			t.Fatalf("ParseTable(%q) error %v, streamed %v, or members differ", table, err, serr)
		}
		want, werr := parseMembersJSON(table)
		if (err == nil) != (werr == nil) {
			t.Fatalf("ParseTable(%q) error %v, reference %v", table, err, werr)
		}
		if err != nil {
			return
		}
		if got := tab.Members(); !reflect.DeepEqual(got, want) && len(want) > 0 {
			t.Fatalf("ParseTable(%q) = %+v, reference %+v", table, got, want)
		}
		ps := tab.Check()
		if want := checkMembersRef(want); !reflect.DeepEqual(ps, want) {
			t.Fatalf("Check(%q) = %v, reference %v", table, ps, want)
		}
		if len(ps) > 0 {
			return
		}
		// A table without problems can be served: no path has a control
		// character, and every empty member has the digest of no bytes.
		for i := range tab.Len() {
			if p := tab.Path(i); strings.ContainsFunc(p, unicode.IsControl) {
				t.Fatalf("Check(%q) accepts path %q", table, p)
			}
			if sum, _ := tab.Sum(i); tab.Size(i) == 0 && sum != b3.Of(nil) {
				t.Fatalf("Check(%q) accepts an empty member with digest %s", table, sum)
			}
		}
	})
}
