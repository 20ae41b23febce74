package derive

import (
	"fmt"
	"testing"
)

// TestDriftMessage: one line naming the transform, the groups in the order
// changed, added, removed (empty ones left out, at most five paths each,
// then "…"), and both digests.
func TestDriftMessage(t *testing.T) {
	for _, c := range []struct {
		e    DriftError
		what string
	}{
		{DriftError{Changed: []string{"a", "b", "c"}, Added: []string{"d"}, Removed: []string{"e"}},
			"3 changed: a, b, c; 1 added: d; 1 removed: e"},
		{DriftError{Removed: []string{"x/1", "x/2"}}, "2 removed: x/1, x/2"},
		{DriftError{Added: []string{"1", "2", "3", "4", "5", "6", "7"}, Removed: []string{"r"}},
			"7 added: 1, 2, 3, 4, 5, …; 1 removed: r"},
		{DriftError{Changed: []string{"1", "2", "3", "4", "5"}}, "5 changed: 1, 2, 3, 4, 5"},
		{DriftError{Changed: []string{"bad\nname"}}, `1 changed: "bad\nname"`},
		{DriftError{Missing: "recorded output not in the store"}, "recorded output not in the store"},
		{DriftError{}, "the same members; the manifests differ in other fields"},
	} {
		c.e.Transform, c.e.Recorded, c.e.Rerun = "harvest@v1.4.2", dA, dB
		want := fmt.Sprintf("transform harvest@v1.4.2 produced different bytes than recorded (%s): "+
			"the derivation changed without a new version (recorded %s, rerun %s)", c.what, dA, dB)
		if got := c.e.Error(); got != want {
			t.Errorf("Error() =\n%s\nwant\n%s", got, want)
		}
	}
}
