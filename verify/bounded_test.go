package verify_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	pstore "github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

// A member table larger than its manifest's count allows is refused,
// naming the key and the limit, whether it is streamed or read whole,
// before it is parsed (issue 22, item 8).
func TestFetchRefusesATableBeyondItsCount(t *testing.T) {
	ctx := context.Background()
	ms := []verify.Member{casMember("a"), s3Member("b")}
	m, mb, _ := buildSnapshot(t, ms, nil)
	td, _ := m.Members.Digest()
	huge := bytes.Repeat([]byte("x"), int(pstore.TableLimit(2))+1)
	whole := store{verify.ManifestKey(m.SnapshotID): mb, verify.MembersKey(td): huge}
	for name, g := range map[string]verify.Getter{
		"read whole": whole,
		"streamed":   &opener{store: whole},
	} {
		_, err := verify.Fetch(ctx, g, m.SnapshotID)
		if !errors.Is(err, pstore.ErrTooLarge) || !strings.Contains(err.Error(), verify.MembersKey(td)) ||
			!strings.Contains(err.Error(), "for the 2 members the manifest counts") {
			t.Errorf("%s: Fetch of a table of %d bytes for 2 members: %v; want it refused naming the key and the count", name, len(huge), err)
		}
	}
}
