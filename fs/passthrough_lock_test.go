package fs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// slowBacker is a backReader whose Backing waits for release (as it
// does while a large member file is verified), and then has no file.
type slowBacker struct {
	*backReader
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (s *slowBacker) Backing(ctx context.Context, i int) (*os.File, bool) {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	return nil, false
}

// TestPassthroughOpenInterruptible: an open waiting behind another open
// of the same file, whose backing file is being verified, returns EINTR
// when its own ctx ends (the kernel interrupts it), not when the other
// open is done.
func TestPassthroughOpenInterruptible(t *testing.T) {
	snap, data := snapshot(t, fixture)
	ps := paths(t, fixture)
	big := memberIndex(t, ps, "train/part-000.jsonl")
	r := &slowBacker{backReader: newBackReader(t, data, big), entered: make(chan struct{}), release: make(chan struct{})}
	root, dir, _ := mountProbed(t, snap, r)
	if _, err := os.Stat(filepath.Join(dir, ps[big])); err != nil {
		t.Fatal(err)
	}
	f := fileNode(t, root, dir, ps[big])

	first := make(chan syscall.Errno, 1)
	go func() {
		_, _, errno := f.openPassthrough(context.Background(), r)
		first <- errno
	}()
	<-r.entered
	defer close(r.release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	second := make(chan syscall.Errno, 1)
	go func() {
		_, _, errno := f.openPassthrough(ctx, r)
		second <- errno
	}()
	select {
	case errno := <-second:
		if !errors.Is(errno, syscall.EINTR) {
			t.Fatalf("an open interrupted while another verifies: %v, want EINTR", errno)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an open interrupted while another verifies did not return")
	}
}
