package pin

import (
	"strings"
	"testing"
)

func TestCheckTransform(t *testing.T) {
	h40, h64 := strings.Repeat("a1", 20), strings.Repeat("0f", 32)
	for _, ok := range []string{
		"",
		"registry/harvest@sha256:" + h64,
		"registry.example.com:5000/team/harvest:v1@sha256:" + h64,
		"github.com/acme/harvest@" + h40,
		"github.com/acme/harvest@" + h64,
	} {
		if err := CheckTransform(ok); err != nil {
			t.Errorf("CheckTransform(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{
		"registry/harvest:v1",
		"registry/harvest",
		"registry/harvest@latest",
		"registry/harvest@sha256:" + h40,
		"registry/harvest@sha256:" + h64 + "0",
		"registry/harvest@sha512:" + h64 + h64,
		"registry/harvest@sha256:" + strings.ToUpper(h64),
		"registry/harvest@" + h40[:39],
		"@sha256:" + h64,
		"reg harvest@sha256:" + h64,
		"registry/harvest@sha256:" + h64 + "\n",
	} {
		err := CheckTransform(bad)
		if err == nil || !strings.Contains(err.Error(), "not pinned by a digest") || strings.Contains(err.Error(), "\n") {
			t.Errorf("CheckTransform(%q) = %v, want a one-line refusal", bad, err)
		}
	}
	const want = "--transform registry/harvest:v1: not pinned by a digest (NAME@sha256:<64 hex>, or NAME@<40 or 64 hex commit>); " +
		"same tag, new digest cannot be detected otherwise"
	if err := CheckTransform("registry/harvest:v1"); err == nil || err.Error() != want {
		t.Errorf("CheckTransform of a tag: %v\nwant %s", err, want)
	}
}

// TestTransformAlternative: what pin's refusal offers instead: pinfs
// derive for a version, the digest form for a tag.
func TestTransformAlternative(t *testing.T) {
	for in, want := range map[string]string{
		"harvest@v1": "a version such as harvest@v1 is for pinfs derive --transform, whose --check reruns the derivation " +
			"and catches a version that changed",
		"registry/harvest:v1": "name the image by its digest: registry/harvest:v1@sha256:<64 hex>",
		// A digest or commit cut short or in upper case is not a version
		// for derive: the alternative is the same digest in full.
		"registry/harvest@sha256:5e1c":                        "a digest is in full, in lower case: registry/harvest@sha256:<64 hex>",
		"registry/harvest@SHA256:" + strings.Repeat("0F", 32): "a digest is in full, in lower case: registry/harvest@sha256:" + strings.Repeat("0f", 32),
		"github.com/acme/harvest@" + strings.Repeat("A1", 20): "a commit is in full, in lower case: github.com/acme/harvest@" + strings.Repeat("a1", 20),
		"github.com/acme/harvest@1a2b3c4": "if 1a2b3c4 is a short commit, give all of it (github.com/acme/harvest@<40 or 64 hex commit>); " +
			"a version such as github.com/acme/harvest@1a2b3c4 is for pinfs derive --transform, whose --check reruns the derivation " +
			"and catches a version that changed",
	} {
		if got := TransformAlternative(in); got != want {
			t.Errorf("TransformAlternative(%q) = %q, want %q", in, got, want)
		}
	}
}
