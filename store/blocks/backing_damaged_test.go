package blocks

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/pinfs/pinfs/verify/b3"
)

// TestBackingDamagedKeepsAnotherFile: a backing file still held (by live
// opens) that fails its recheck is reported, but when the member file's
// name has meanwhile been given to another file, that file, which nobody
// has found wrong, is not removed with it.
func TestBackingDamagedKeepsAnotherFile(t *testing.T) {
	e := newBackingEnv(t)
	ctx := context.Background()
	m := e.member(3*BlockSize + 5)
	p := e.put(m, e.data[m.Digest])
	held, err := e.r.Backing(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	// The name now names a good copy; the held file is written in place.
	if err := os.Rename(p, p+".old"); err != nil {
		t.Fatal(err)
	}
	e.put(m, e.data[m.Digest])
	w, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(held.Fd())), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.WriteAt([]byte{e.data[m.Digest][7] ^ 1}, 7)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.r.Recheck(ctx, m, held); !errors.Is(err, b3.ErrMismatch) {
		t.Fatalf("Recheck of a held file written in place: %v, want a mismatch", err)
	}
	if ev := e.rec.all(); len(ev) != 1 || ev[0].Kind != KindMismatch || ev[0].From != FromDisk {
		t.Fatalf("events %+v, want one disk mismatch", ev)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, e.data[m.Digest]) {
		t.Fatalf("the good file at the member's name was removed with the damaged one it replaced: %v", err)
	}
	e.handOver(m)
}
