package verify_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
)

// BLAKE3 digests as printed by b3sum for "hello", "world" and "".
const (
	b3Hello = "blake3:ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f"
	b3World = "blake3:d7894ae9716d38d2dfad0ec55424ca321ee12453d51f1b3adeb77d0475ed988c"
	b3Empty = "blake3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
)

// s3Member returns a well-formed member pinned to an S3 object version.
func s3Member(path string) verify.Member {
	return verify.Member{
		ID: path, Path: path, Split: "train", Size: 5, Digest: b3Hello,
		S3: &verify.S3Source{Bucket: "bucket", Key: "data/" + path, VersionID: "v-" + path, ETag: `"etag"`},
	}
}

// casMember returns a well-formed member stored in the CAS.
func casMember(path string) verify.Member {
	return verify.Member{ID: path, Path: path, Size: 5, Digest: b3World, CAS: b3World}
}

// encode is EncodeMembers that fails the test on error.
func encode(t testing.TB, ms []verify.Member) []byte {
	t.Helper()
	b, err := verify.EncodeMembers(ms)
	if err != nil {
		t.Fatalf("EncodeMembers: %v", err)
	}
	return b
}

var tricky = []string{
	`"quoted"`, `back\slash`, `\u0041 spelled out`, `\"`, `\\`,
	"tab\tnewline\ncr\rbs\bff\fnul\x00us\x1fdel\x7f",
	"é 日本語 😀 👩‍👩‍👧 \U0010ffff", "\u2028\u2029", "<>&'", "\ufeff", " ",
}

func TestMembersRoundTrip(t *testing.T) {
	var ms []verify.Member
	for i, s := range tricky {
		m := s3Member("")
		m.ID, m.Path, m.Split = s+"#id", "p"+s+string(rune('a'+i)), s
		m.S3.Key, m.S3.VersionID, m.S3.ETag = s, s+"v", s
		ms = append(ms, m)
		c := casMember("")
		c.ID, c.Path = "cas"+s, "q"+s+string(rune('a'+i))
		ms = append(ms, c)
	}
	// Sizes at the edges of what JSON carries exactly.
	ms = append(ms, verify.Member{ID: "big", Path: "zbig", Size: 1<<53 - 1, Digest: b3Empty, CAS: b3Empty})
	ms = append(ms, verify.Member{ID: "empty", Path: "zempty", Size: 0, Digest: b3Empty, CAS: b3Empty})
	slices.SortFunc(ms, func(a, b verify.Member) int { return strings.Compare(a.Path, b.Path) })

	table := encode(t, ms)
	got, err := verify.ParseMembers(table)
	if err != nil {
		t.Fatalf("ParseMembers: %v", err)
	}
	if !reflect.DeepEqual(got, ms) {
		t.Fatalf("round trip changed the members:\n got %+v\nwant %+v", got, ms)
	}
	lines := strings.SplitAfter(string(table), "\n")
	if lines[len(lines)-1] != "" || len(lines)-1 != len(ms) {
		t.Fatalf("table has %d lines for %d members", len(lines)-1, len(ms))
	}
	for i, line := range lines[:len(ms)] {
		line = strings.TrimSuffix(line, "\n")
		// Each line is what the general JCS encoder makes of it ...
		if c, err := jcs.Canonicalize([]byte(line)); err != nil || string(c) != line {
			t.Errorf("line %d is not canonical: %s (%v)\n%s", i, c, err, line)
		}
		// ... and an independent decoder reads the same member.
		var m verify.Member
		if err := json.Unmarshal([]byte(line), &m); err != nil || !reflect.DeepEqual(m, ms[i]) {
			t.Errorf("line %d decodes to %+v, %v", i, m, err)
		}
	}
}

func TestEncodeMembersRefuses(t *testing.T) {
	a, b := casMember("a"), casMember("b")
	bad := func(f func(m *verify.Member)) []verify.Member {
		m := casMember("c")
		f(&m)
		return []verify.Member{a, b, m}
	}
	for name, ms := range map[string][]verify.Member{
		"unsorted":         {b, a},
		"duplicate path":   {a, a},
		"invalid UTF-8":    bad(func(m *verify.Member) { m.ID = "\xff" }),
		"invalid UTF-8 s3": bad(func(m *verify.Member) { m.S3 = &verify.S3Source{Key: "k\xc3"} }),
		"negative size":    bad(func(m *verify.Member) { m.Size = -1 }),
		"size over 2^53-1": bad(func(m *verify.Member) { m.Size = 1 << 53 }),
	} {
		if _, err := verify.EncodeMembers(ms); err == nil {
			t.Errorf("%s: EncodeMembers succeeded", name)
		}
	}
}

func TestParseMembersRefuses(t *testing.T) {
	m := s3Member("p/a")
	m.ID = "A"
	line := strings.TrimSuffix(string(encode(t, []verify.Member{m})), "\n")
	ctl := casMember("p/c")
	ctl.ID = "x\x1fy\tz"
	ctlLine := strings.TrimSuffix(string(encode(t, []verify.Member{ctl})), "\n")
	other := strings.TrimSuffix(string(encode(t, []verify.Member{casMember("p/b")})), "\n")
	if _, err := verify.ParseMembers([]byte(line + "\n" + other + "\n" + ctlLine + "\n")); err != nil {
		t.Fatalf("the unmodified table is refused: %v", err)
	}
	replace := func(s, old, new string) string {
		t.Helper()
		if !strings.Contains(s, old) {
			t.Fatalf("%q not in %s", old, s)
		}
		return strings.Replace(s, old, new, 1)
	}
	for name, table := range map[string]string{
		"space after colon":        replace(line, `"id":"A"`, `"id": "A"`) + "\n",
		"space after brace":        "{ " + line[1:] + "\n",
		"trailing space":           line + " \n",
		"leading space":            " " + line + "\n",
		"CRLF":                     line + "\r\n",
		"reordered keys":           replace(line, `"id":"A","path":"p/a"`, `"path":"p/a","id":"A"`) + "\n",
		"reordered s3 keys":        replace(line, `{"bucket":"bucket","etag":"\"etag\""`, `{"etag":"\"etag\"","bucket":"bucket"}`) + "\n",
		"unknown field":            replace(line, `"split":"train"}`, `"split":"train","zzz":1}`) + "\n",
		"unknown s3 field":         replace(line, `"versionId":"v-p/a"}`, `"versionId":"v-p/a","x":1}`) + "\n",
		"case variant key":         replace(line, `"id":`, `"ID":`) + "\n",
		"duplicate key":            replace(line, `"id":"A"`, `"id":"A","id":"A"`) + "\n",
		"escaped letter":           replace(line, `"id":"A"`, `"id":"\u0041"`) + "\n",
		"escaped slash":            replace(line, `"path":"p/a"`, `"path":"p\/a"`) + "\n",
		"escaped key":              replace(line, `"size":`, `"\u0073ize":`) + "\n",
		"upper-case hex escape":    replace(ctlLine, `\u001f`, `\u001F`) + "\n",
		"tab as \\u0009":           replace(ctlLine, `\t`, `\u0009`) + "\n",
		"size 5.0":                 replace(line, `"size":5`, `"size":5.0`) + "\n",
		"size 5e0":                 replace(line, `"size":5`, `"size":5e0`) + "\n",
		"size as string":           replace(line, `"size":5`, `"size":"5"`) + "\n",
		"negative size":            replace(line, `"size":5`, `"size":-5`) + "\n",
		"size 2^53":                replace(line, `"size":5`, `"size":9007199254740992`) + "\n",
		"empty split present":      replace(line, `"split":"train"`, `"split":""`) + "\n",
		"empty etag present":       replace(line, `"etag":"\"etag\""`, `"etag":""`) + "\n",
		"null s3 present":          replace(other, `"path":"p/b",`, `"path":"p/b","s3":null,`) + "\n",
		"empty cas present":        `{"cas":"",` + line[1:] + "\n",
		"invalid UTF-8":            replace(line, `"id":"A"`, "\"id\":\"A\xff\"") + "\n",
		"trailing value":           line + "{}\n",
		"trailing garbage":         line + "x\n",
		"null line":                "null\n",
		"empty object":             "{}\n",
		"empty line":               "\n" + line + "\n",
		"empty last line":          line + "\n\n",
		"missing newline at end":   line,
		"missing newline, 2 lines": line + "\n" + other,
		"duplicate line":           line + "\n" + line + "\n",
		"duplicate path":           line + "\n" + replace(line, `"id":"A"`, `"id":"B"`) + "\n",
		"unsorted paths":           other + "\n" + line + "\n",
	} {
		if ms, err := verify.ParseMembers([]byte(table)); err == nil {
			t.Errorf("%s: ParseMembers accepted %q as %+v", name, table, ms)
		}
	}
}

// TestParseMembersLineRemoved: a table with a line removed is still a
// well-formed table; only the manifest's digest and count catch it
// (TestCheckRefusesBadTable).
func TestParseMembersLineRemoved(t *testing.T) {
	ms := []verify.Member{casMember("a"), s3Member("b"), casMember("c")}
	table := encode(t, ms)
	i := bytes.IndexByte(table, '\n')
	got, err := verify.ParseMembers(table[i+1:])
	if err != nil || !reflect.DeepEqual(got, ms[1:]) {
		t.Fatalf("ParseMembers(table without line 1) = %+v, %v", got, err)
	}
	if got, err := verify.ParseMembers(nil); err != nil || len(got) != 0 {
		t.Fatalf("ParseMembers(empty) = %+v, %v", got, err)
	}
}

// FuzzParseMembers checks that ParseMembers never panics and that every
// table it accepts is exactly what EncodeMembers makes of its members.
func FuzzParseMembers(f *testing.F) {
	ms := []verify.Member{casMember("a"), s3Member("a b/\"c\""), {ID: "x\x00", Path: "b", Size: 1<<53 - 1, Digest: b3Empty, CAS: b3Empty}, s3Member("é/😀")}
	table, err := verify.EncodeMembers(ms)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(table)
	lines := bytes.SplitAfter(table, []byte("\n"))
	for _, l := range lines {
		f.Add(l)
	}
	f.Add(bytes.Join([][]byte{lines[1], lines[0]}, nil))
	f.Add([]byte(`{"digest":"x","id":"\u0041","path":"a","size":1}` + "\n"))
	f.Add([]byte(`{"digest":"x","id":"a","path":"a","size":1.0}` + "\n"))
	f.Fuzz(func(t *testing.T, table []byte) {
		ms, err := verify.ParseMembers(table)
		if err != nil {
			return
		}
		again, err := verify.EncodeMembers(ms)
		if err != nil {
			t.Fatalf("ParseMembers accepted %q, EncodeMembers refuses its members: %v", table, err)
		}
		if !bytes.Equal(again, table) {
			t.Fatalf("ParseMembers accepted %q, which re-encodes to %q", table, again)
		}
		verify.CheckMembers(ms) // must not panic
	})
}
