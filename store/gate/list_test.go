package gate

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

func TestPutGetList(t *testing.T) {
	st, _ := newLocal(t)
	ctx := t.Context()
	d, n, err := PutList(ctx, st, []string{"blake3:" + strings.Repeat("ab", 32), "id-2", "id-1", "id-2"})
	if err != nil || n != 3 {
		t.Fatalf("PutList = %s, %d, %v; want 3 entries", d, n, err)
	}
	want := []string{"blake3:" + strings.Repeat("ab", 32), "id-1", "id-2"}
	canon := `["blake3:` + strings.Repeat("ab", 32) + `","id-1","id-2"]`
	if d != verify.SHA256([]byte(canon)) {
		t.Fatalf("digest %s is not that of %s", d, canon)
	}
	if data, err := st.Get(ctx, ListKey(d)); err != nil || string(data) != canon {
		t.Fatalf("stored %q, %v; want %s", data, err, canon)
	}
	if got, err := GetList(ctx, st, d); err != nil || !slices.Equal(got, want) {
		t.Fatalf("GetList = %q, %v; want %q", got, err, want)
	}
	// The same entries in any order make the same list.
	if d2, _, err := PutList(ctx, st, []string{"id-1", "id-2", "blake3:" + strings.Repeat("ab", 32)}); err != nil || d2 != d {
		t.Fatalf("PutList(reordered) = %s, %v; want %s", d2, err, d)
	}
	if d, n, err := PutList(ctx, st, nil); err != nil || n != 0 || d != verify.SHA256([]byte("[]")) {
		t.Fatalf("PutList(nil) = %s, %d, %v; want the empty array", d, n, err)
	}
	for _, bad := range [][]string{{"a", ""}, {"\xff"}, {"a\nb"}, {"BLAKE3:" + strings.Repeat("AB", 32)}} {
		if _, _, err := PutList(ctx, st, bad); err == nil {
			t.Errorf("PutList(%q) accepted", bad)
		}
	}
}

func TestGetListRefuses(t *testing.T) {
	st, dir := newLocal(t)
	ctx := t.Context()
	if _, err := GetList(ctx, st, snap("none")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetList(missing) = %v; want ErrNotFound", err)
	}
	if _, err := GetList(ctx, st, "sha256:xyz"); err == nil {
		t.Error("GetList(bad digest) accepted")
	}
	for _, tc := range []struct{ data, want string }{
		{`["b","a"]`, "out of order"},
		{`["a","a"]`, "repeated"},
		{`["a",""]`, "empty"},
		{`[ "a"]`, "not canonical"},
		{`{"a":1}`, "cannot unmarshal"},
		{`null`, "not a JSON array"},
		// An entry that is meant as a digest but is not canonical would
		// never match a member: a store claim pinfs refuses.
		{`["blake3:` + strings.Repeat("AB", 32) + `"]`, "blake3:<64 lower-case hex>"},
		{`["BLAKE3:` + strings.Repeat("ab", 32) + `"]`, "blake3:<64 lower-case hex>"},
		{`["a\u001bb"]`, "control character"},
	} {
		d := verify.SHA256([]byte(tc.data))
		if err := st.Put(ctx, ListKey(d), []byte(tc.data)); err != nil {
			t.Fatal(err)
		}
		if _, err := GetList(ctx, st, d); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("GetList(%s) = %v; want %q", tc.data, err, tc.want)
		}
	}
	// Bytes that do not hash to their key.
	d, _, _ := PutList(ctx, st, []string{"x"})
	tamper(t, dir, ListKey(d), `["y"]`)
	if _, err := GetList(ctx, st, d); err == nil || !strings.Contains(err.Error(), "tampered") {
		t.Errorf("GetList(tampered) = %v", err)
	}
}

func TestCheckEntry(t *testing.T) {
	hex := strings.Repeat("0123456789abcdef", 4)
	for _, ok := range []string{"blake3:" + hex, "train/a.bin", "user/42", hex, "blake3", "x:blake3:" + hex} {
		if err := CheckEntry(ok); err != nil {
			t.Errorf("CheckEntry(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "\xff", "a\tb", "a\x7f",
		"blake3:" + strings.ToUpper(hex), "BLAKE3:" + hex, "Blake3:" + hex, "blake3:" + hex[:63], "blake3:" + hex + "0",
		"blake3:" + hex[:62] + "zz", "blake3:", "blake3: " + hex,
		"sha256:" + hex, "SHA256:" + hex, "sha256:",
	} {
		if err := CheckEntry(bad); err == nil {
			t.Errorf("CheckEntry(%q) accepted", bad)
		}
	}
}
