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

// TestEnv: the inherited environment without any enclosing derivation's
// variables, then this one's inputs (both spellings), output, params,
// transform and key.
func TestEnv(t *testing.T) {
	r, err := record.New([]record.Input{{Name: "raw", Digest: dA}, {Name: "LABELS", Digest: dB}}, "harvest@v1.4.2",
		map[string]string{"min.agree-ment": "5"}, []string{"true"}, "dir")
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"HOME=/root", "PINFS_INPUT_old=/x", "PINFS_PARAM_OLD=1", "PINFS_OUTPUT=/y", "PINFS_TRANSFORM=old@v0",
		"PINFS_DERIVATION_KEY=k", "PINFS_STORE=/st"}
	got := Env(base, r, "/w/inputs", "/w/output")
	want := []string{"HOME=/root", "PINFS_STORE=/st",
		"PINFS_INPUT_LABELS=/w/inputs/LABELS",
		"PINFS_INPUT_raw=/w/inputs/raw", "PINFS_INPUT_RAW=/w/inputs/raw",
		"PINFS_OUTPUT=/w/output", "PINFS_PARAM_MIN_AGREE_MENT=5",
		"PINFS_TRANSFORM=harvest@v1.4.2", "PINFS_DERIVATION_KEY=" + string(r.Key)}
	if !slices.Equal(got, want) {
		t.Errorf("Env =\n%q\nwant\n%q", got, want)
	}
}
