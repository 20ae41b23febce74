package derive

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
	record "github.com/pinfs/pinfs/verify/derive"
)

var (
	dA = verify.Digest("sha256:" + strings.Repeat("a", 64))
	dB = verify.Digest("sha256:" + strings.Repeat("b", 64))
)

// TestParseInputs: NAME=<full digest> only; an alias, latest, a prefix or
// a path wraps verify.ErrNotDigest, and a bad or repeated name is refused.
func TestParseInputs(t *testing.T) {
	ins, err := ParseInputs([]string{"raw=" + string(dA), "labels=" + string(dB)})
	if err != nil {
		t.Fatal(err)
	}
	want := []record.Input{{Name: "raw", Digest: dA}, {Name: "labels", Digest: dB}}
	if !slices.Equal(ins, want) {
		t.Errorf("ParseInputs = %v, want %v (the order given)", ins, want)
	}
	for _, v := range []string{"raw=latest", "raw=prod", "raw=sha256:aaaa", "raw=" + strings.ToUpper(string(dA)), "raw=/data/x", "raw="} {
		if _, err := ParseInputs([]string{v}); !errors.Is(err, verify.ErrNotDigest) {
			t.Errorf("ParseInputs(%q) = %v, want an error wrapping ErrNotDigest", v, err)
		}
	}
	for _, c := range []struct{ vals []string }{
		{[]string{string(dA)}},                               // no name
		{[]string{"=" + string(dA)}},                         // empty name
		{[]string{"9raw=" + string(dA)}},                     // starts with a digit
		{[]string{"r-w=" + string(dA)}},                      // not an env name
		{[]string{"raw=" + string(dA), "raw=" + string(dB)}}, // twice
		{nil}, // none
	} {
		if ins, err := ParseInputs(c.vals); err == nil || errors.Is(err, verify.ErrNotDigest) {
			t.Errorf("ParseInputs(%q) = %v, %v; want a name error", c.vals, ins, err)
		}
	}
}

// TestParseParams: KEY=VALUE with the value kept whole; no "=", a bad key,
// or a key given twice is refused.
func TestParseParams(t *testing.T) {
	ps, err := ParseParams([]string{"min_agreement=5", "filter=a=b", "empty="})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps["min_agreement"] != "5" || ps["filter"] != "a=b" || ps["empty"] != "" {
		t.Errorf("ParseParams = %v", ps)
	}
	if ps, err := ParseParams(nil); err != nil || ps == nil || len(ps) != 0 {
		t.Errorf("ParseParams(nil) = %v, %v; want an empty map", ps, err)
	}
	for _, vals := range [][]string{{"x"}, {"a b=1"}, {"=1"}, {"k=1", "k=2"}, {"k=a\nb"}} {
		if _, err := ParseParams(vals); err == nil {
			t.Errorf("ParseParams(%q) accepted", vals)
		}
	}
}

// TestParents: the distinct input digests in the record's order (by
// name), whatever order the inputs were given in.
func TestParents(t *testing.T) {
	r1, err := record.New([]record.Input{{Name: "z", Digest: dA}, {Name: "a", Digest: dB}, {Name: "m", Digest: dA}}, "t@v1", nil, []string{"true"}, "dir")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := record.New([]record.Input{{Name: "m", Digest: dA}, {Name: "a", Digest: dB}, {Name: "z", Digest: dA}}, "t@v1", nil, []string{"true"}, "dir")
	if err != nil {
		t.Fatal(err)
	}
	want := []verify.Digest{dB, dA}
	if got := Parents(r1); !slices.Equal(got, want) {
		t.Errorf("Parents = %v, want %v", got, want)
	}
	if got := Parents(r2); !slices.Equal(got, want) {
		t.Errorf("Parents with the inputs given in another order = %v, want %v", got, want)
	}
}
