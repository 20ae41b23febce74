package mountstatus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/fs"
)

// getFrom is an xattr reader that asks c directly, as the mount would
// answer getxattr; before, if set, runs before each call.
func getFrom(c *Consumed, before func(name string)) func(path, name string) ([]byte, error) {
	return func(path, name string) ([]byte, error) {
		if before != nil {
			before(name)
		}
		v, ok := c.Attr(name)
		if !ok {
			return nil, unix.ENODATA
		}
		if len(v) > 64<<10 {
			return nil, unix.E2BIG // XATTR_SIZE_MAX
		}
		return v, nil
	}
}

// TestConsumedInOneAndInParts: a small set comes in the header, a large
// one in parts of one snapshot; every value fits an attribute.
func TestConsumedInOneAndInParts(t *testing.T) {
	for _, size := range []int{0, 10, ConsumedPart, ConsumedPart + 1, 5*ConsumedPart + 17} {
		text := "c1." + strings.Repeat("x", size)
		var calls atomic.Int64
		c := &Consumed{Encode: func() string { calls.Add(1); return text }}
		got, at, err := readConsumed(context.Background(), "/m", getFrom(c, nil))
		if err != nil || got != text || time.Since(at) > time.Minute {
			t.Fatalf("size %d: read %d bytes at %v, %v", size, len(got), at, err)
		}
		if calls.Load() != 1 {
			t.Errorf("size %d: encoded %d times for one read, want once", size, calls.Load())
		}
	}
}

// TestConsumedSnapshotGone: a reader whose snapshot the daemon dropped
// meanwhile (it made newer ones for other readers) starts again and gets
// a whole newer set, never a mix of two.
func TestConsumedSnapshotGone(t *testing.T) {
	now := time.Unix(1000, 0)
	gen := 0
	c := &Consumed{now: func() time.Time { return now }}
	c.Encode = func() string {
		gen++
		return "c1." + strings.Repeat(string(rune('a'+gen)), 3*ConsumedPart)
	}
	drops := 0
	before := func(name string) {
		if strings.HasSuffix(name, ".1") && drops < 2 {
			drops++
			for range snapshotsKept { // other readers, each a second apart
				now = now.Add(snapshotReuse)
				c.Attr(fs.XattrConsumed)
			}
		}
	}
	got, _, err := readConsumed(context.Background(), "/m", getFrom(c, before))
	want := "c1." + strings.Repeat(string(rune('a'+gen)), 3*ConsumedPart)
	if err != nil || got != want || drops != 2 {
		t.Fatalf("read %q… (%d bytes), %v after %d drops; want the newest set whole", got[:min(len(got), 8)], len(got), err, drops)
	}

	// Dropped on every try: an error, not a mix.
	drops = -100
	if _, _, err := readConsumed(context.Background(), "/m", getFrom(c, before)); !errors.Is(err, ErrSnapshotGone) {
		t.Fatalf("read with the snapshot always gone: %v, want ErrSnapshotGone", err)
	}
}

// TestConsumedHeaderReused: the header's size probe and the read after it
// see one snapshot (within snapshotReuse), so a set that grows between
// them is not "a value that keeps growing".
func TestConsumedHeaderReused(t *testing.T) {
	now := time.Unix(1000, 0)
	n := 0
	c := &Consumed{now: func() time.Time { return now }, Encode: func() string { n++; return "c1." + strings.Repeat("y", n) }}
	a, _ := c.Attr(fs.XattrConsumed)
	now = now.Add(snapshotReuse / 2)
	b, _ := c.Attr(fs.XattrConsumed)
	if string(a) != string(b) || n != 1 {
		t.Fatalf("two headers within %v: %q and %q, encoded %d times", snapshotReuse, a, b, n)
	}
	now = now.Add(snapshotReuse)
	if b, _ = c.Attr(fs.XattrConsumed); string(a) == string(b) || n != 2 {
		t.Fatalf("a header after %v is the old one: %q (encoded %d times)", snapshotReuse, b, n)
	}
	for _, bad := range []string{fs.XattrConsumed + ".x.0", fs.XattrConsumed + ".1", fs.XattrConsumed + ".1.-1", fs.XattrConsumed + ".1.9", fs.XattrConsumed + ".99.0"} {
		if v, ok := c.Attr(bad); ok {
			t.Errorf("Attr(%s) = %q, want none", bad, v)
		}
	}
}

// TestConsumedCorruptAnswer: text that does not match its header is an
// error.
func TestConsumedCorruptAnswer(t *testing.T) {
	c := &Consumed{Encode: func() string { return "c1." + strings.Repeat("z", 2*ConsumedPart) }}
	get := getFrom(c, nil)
	bad := func(path, name string) ([]byte, error) {
		v, err := get(path, name)
		if strings.HasSuffix(name, ".1") {
			v = v[:len(v)-1]
		}
		return v, err
	}
	if _, _, err := readConsumed(context.Background(), "/m", bad); err == nil || !strings.Contains(err.Error(), "does not match its header") {
		t.Fatalf("a short part: %v", err)
	}
}

// TestConsumedBounded: a daemon whose header does not add up, or that
// answers every part it is asked for, is not read for ever: the parts
// read are those the header's size takes, and none once the caller's
// context ends.
func TestConsumedBounded(t *testing.T) {
	part := strings.Repeat("x", ConsumedPart)
	var gets atomic.Int64
	endless := func(header string) func(path, name string) ([]byte, error) {
		gets.Store(0)
		return func(path, name string) ([]byte, error) {
			if gets.Add(1) > 100 {
				return nil, unix.EIO // the test's own bound
			}
			if name == fs.XattrConsumed {
				return []byte(header), nil
			}
			return []byte(part), nil
		}
	}
	ctx := context.Background()
	_, _, err := readConsumed(ctx, "/m", endless(`{"id":1,"size":10,"parts":1000000000,"sha256":"00"}`))
	if err == nil || !strings.Contains(err.Error(), "gives 1000000000 parts for 10 bytes") || gets.Load() != 1 {
		t.Errorf("a header whose parts do not fit its size: %v after %d getxattrs; want refused after the header", err, gets.Load())
	}
	_, _, err = readConsumed(ctx, "/m", endless(`{"id":1,"size":10,"parts":1,"sha256":"00"}`))
	if err == nil || !strings.Contains(err.Error(), "longer than its header's 10 bytes") || gets.Load() != 2 {
		t.Errorf("a part longer than the header's size: %v after %d getxattrs", err, gets.Load())
	}
	cctx, cancel := context.WithCancel(ctx)
	huge := fmt.Sprintf(`{"id":1,"size":%d,"parts":%d,"sha256":"00"}`, 1000*ConsumedPart, 1000)
	get := endless(huge)
	n := 0
	_, _, err = readConsumed(cctx, "/m", func(path, name string) ([]byte, error) {
		if n++; n == 5 {
			cancel()
		}
		return get(path, name)
	})
	if !errors.Is(err, ErrNoAnswer) || !errors.Is(err, context.Canceled) || gets.Load() != 5 {
		t.Errorf("the caller stopped waiting: %v after %d getxattrs; want ErrNoAnswer after 5", err, gets.Load())
	}
}
