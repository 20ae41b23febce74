package b3_test

import (
	"bytes"
	"errors"
	"testing"
	"testing/iotest"

	"github.com/pinfs/pinfs/verify/b3"
)

// TestHasherMatchesOf: streaming in pieces gives the one-shot digest, and
// Check tells matching bytes from others.
func TestHasherMatchesOf(t *testing.T) {
	for _, n := range []int{0, 1, 1024, 1025, 3*b3.GroupSize + 7, 5<<20 + 3} {
		data := randomBytes(n, uint64(n))
		h := b3.NewHasher()
		// Small and large writes, so that both the Hasher's buffer and
		// its direct path are used.
		for i, rest := 0, data; len(rest) > 0; i++ {
			k := min(len(rest), []int{1000, 1<<20 + 7, 33}[i%3])
			h.Write(rest[:k])
			rest = rest[k:]
		}
		want := b3.Of(data)
		if h.Sum() != want {
			t.Fatalf("%d bytes: streamed %v, want %v", n, h.Sum(), want)
		}
		if err := b3.Check(iotest.OneByteReader(bytes.NewReader(data)), want); err != nil {
			t.Errorf("%d bytes: Check of the right bytes: %v", n, err)
		}
		other := b3.Of(append(data, 'x'))
		if err := b3.Check(bytes.NewReader(data), other); !errors.Is(err, b3.ErrMismatch) {
			t.Errorf("%d bytes: Check against another digest = %v; want ErrMismatch", n, err)
		}
	}
	boom := errors.New("boom")
	if err := b3.Check(iotest.ErrReader(boom), b3.Of(nil)); !errors.Is(err, boom) {
		t.Errorf("Check of a failing reader = %v; want its error", err)
	}
}
