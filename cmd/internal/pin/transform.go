package pin

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/derive"
)

// CheckTransform accepts a --transform value that names its code or image
// by an immutable digest: NAME@sha256:<64 hex> (an image or blob digest)
// or NAME@<40 or 64 hex> (a git commit, SHA-1 or SHA-256), hex in lower
// case; NAME may carry a tag (registry/harvest:v1@sha256:...). The empty
// value (no transform recorded) is accepted too. A tag alone is refused:
// the same tag can later name other code, and nothing could tell.
func CheckTransform(s string) error {
	if s == "" {
		return nil
	}
	name, ref, ok := cutLast(s, "@")
	if ok && name != "" && !strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		hex, sha := strings.CutPrefix(ref, "sha256:")
		if isLowerHex(hex) && (len(hex) == 64 || !sha && len(hex) == 40) {
			return nil
		}
	}
	return fmt.Errorf("--transform %s: not pinned by a digest (NAME@sha256:<64 hex>, or NAME@<40 or 64 hex commit>); "+
		"same tag, new digest cannot be detected otherwise", verify.Printable(s))
}

// TransformAlternative is what to give pinfs pin instead of a --transform
// s that CheckTransform refused: for a version such as harvest@v1, pinfs
// derive, which takes one because its --check reruns the derivation; for
// a tag, the image's digest (README, "Transform on pin and on derive");
// for a digest or commit cut short or in upper case, the same in full, in
// lower case (a short hex may also be a version: both are named).
func TransformAlternative(s string) string {
	forDerive := fmt.Sprintf("a version such as %s is for pinfs derive --transform, whose --check reruns the derivation "+
		"and catches a version that changed", verify.Printable(s))
	name, ref, _ := cutLast(s, "@")
	n := verify.Printable(name)
	lower := strings.ToLower(ref)
	hex, sha := strings.CutPrefix(lower, "sha256:")
	switch {
	case name == "" || derive.CheckVersion(s) != nil:
	case sha && len(hex) == 64 && isLowerHex(hex):
		return fmt.Sprintf("a digest is in full, in lower case: %s@sha256:%s", n, hex)
	case sha:
		return fmt.Sprintf("a digest is in full, in lower case: %s@sha256:<64 hex>", n)
	case isLowerHex(lower) && (len(lower) == 40 || len(lower) == 64):
		return fmt.Sprintf("a commit is in full, in lower case: %s@%s", n, lower)
	case isLowerHex(lower) && len(lower) >= 7 && len(lower) < 40:
		return fmt.Sprintf("if %s is a short commit, give all of it (%s@<40 or 64 hex commit>); %s", verify.Printable(ref), n, forDerive)
	default:
		return forDerive
	}
	return fmt.Sprintf("name the image by its digest: %s@sha256:<64 hex>", verify.Printable(s))
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// isLowerHex reports whether s is non-empty lower-case hex.
func isLowerHex(s string) bool {
	return s != "" && strings.Trim(s, "0123456789abcdef") == ""
}
