package fs

import (
	"bytes"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMountedConsumedXattr: the consumed attributes reach a reader through
// the kernel whole, up to the 48 KiB parts (and the header around one)
// that pinfs run show reads with a 64 KiB buffer, and a too small buffer
// gets ERANGE as getxattr(2) says.
func TestMountedConsumedXattr(t *testing.T) {
	snap, data := snapshot(t, fixture)
	big := bytes.Repeat([]byte("c1.0123456789"), 60_000/13)
	opts := testOptions()
	opts.Consumed = func(attr string) ([]byte, bool) {
		if attr == XattrConsumed+".1.0" {
			return big, true
		}
		return nil, false
	}
	dir, _ := mount(t, NewRoot(snap, &memReader{data: data}, opts), MountOptions{Name: snap.Digest().String()})
	buf := make([]byte, 64<<10)
	n, err := unix.Getxattr(dir, XattrConsumed+".1.0", buf)
	if err != nil || !bytes.Equal(buf[:n], big) {
		t.Fatalf("getxattr of a %d-byte part: %d bytes, %v", len(big), n, err)
	}
	if _, err := unix.Getxattr(dir, XattrConsumed+".1.0", make([]byte, 4096)); !errors.Is(err, unix.ERANGE) {
		t.Errorf("getxattr into 4 KiB: %v, want ERANGE", err)
	}
	if _, err := unix.Getxattr(dir, XattrConsumed+".2.0", buf); !errors.Is(err, unix.ENODATA) {
		t.Errorf("getxattr of a part not kept: %v, want ENODATA", err)
	}
}
