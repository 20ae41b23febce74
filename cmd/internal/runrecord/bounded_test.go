package runrecord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/store/storetest"
)

// A FIFO at --run-record makes every reader and Open fail at once, naming
// it, instead of blocking until a writer comes (issue 22, item 8).
func TestRecordFIFOFailsAtOnce(t *testing.T) {
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	storetest.MakeFIFO(t, p)
	src := Source{URL: p}
	for name, f := range map[string]func() error{
		"run show": func() error { _, err := ReadRun(t.Context(), src, "r1"); return err },
		"run list": func() error { _, err := List(t.Context(), src, time.Now(), nil); return err },
		"mount": func() error {
			r, err := openLocalRecord(t, p, "r1", digestA)
			if err == nil {
				r.Close(t.Context())
			}
			return err
		},
	} {
		err := storetest.Soon(t, name, f)
		if err == nil || !errors.Is(err, store.ErrNotRegular) || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("%s of a FIFO record: %v; want it refused as a FIFO", name, err)
		}
	}
}

// A FIFO in the spool dir fails the same way.
func TestSpoolFIFOFailsAtOnce(t *testing.T) {
	for _, name := range []string{"run-s.jsonl", "run-s.run.json"} {
		t.Run(name, func(t *testing.T) {
			spool := t.TempDir()
			storetest.MakeFIFO(t, filepath.Join(spool, name))
			err := storetest.Soon(t, "Open", func() error {
				r, err := Open(t.Context(), remoteOptions(newFake(), spool, "run-s", digestA))
				if err == nil {
					r.Close(t.Context())
				}
				return err
			})
			if !errors.Is(err, store.ErrNotRegular) {
				t.Fatalf("Open with a FIFO at %s: %v; want it refused", name, err)
			}
		})
	}
}

// An event object larger than a record may be is refused, naming the
// limit, before it is read: run show and list do not hold it (issue 22,
// item 8).
func TestOversizedEventObjectRefused(t *testing.T) {
	dir := t.TempDir()
	st, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	e := ev("big", RunStart, 0, "h1", 1, 1)
	line := lineOf(t, e)
	if err := st.Put(ctx, eventKey(&e, line), line); err != nil {
		t.Fatal(err)
	}
	huge := ev("big", ConsumedSet, 1, "h1", 1, 2)
	p := filepath.Join(dir, filepath.FromSlash(eventKey(&huge, []byte("huge"))))
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, store.MaxRecord+1); err != nil { // sparse: takes no disk
		t.Fatal(err)
	}
	src := Source{URL: "s3://bkt/runs", Open: func(context.Context, string) (store.Blobs, error) { return st, nil }}
	var before, after runtimeMem
	before.read()
	_, err = ReadRun(ctx, src, "big")
	after.read()
	if err == nil || !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "16 MiB") {
		t.Fatalf("ReadRun of a run with a 16 MiB + 1 event object: %v; want it refused naming 16 MiB", err)
	}
	if got := after.total - before.total; got > store.MaxRecord/4 {
		t.Fatalf("refusing it allocated %d bytes; want it refused before the object is read", got)
	}
}

// A line of a local record longer than a record may be is refused, naming
// the limit, rather than held whole.
func TestOversizedRecordLineRefused(t *testing.T) {
	defer func(n int) { maxLine = n }(maxLine)
	maxLine = 4 << 10
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	big := consumedEv("r1", 1, "h1", 1, 2, "c1."+strings.Repeat("A", 8<<10))
	writeLines(t, p, "", ev("r1", RunStart, 0, "h1", 1, 1), big)
	_, err := ReadRun(t.Context(), Source{URL: p}, "r1")
	if err == nil || !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "4 KiB") {
		t.Fatalf("ReadRun of a record with an 8 KiB line, 4 KiB allowed: %v; want it refused naming the limit", err)
	}
	// run list cuts the payload off every line: what it keeps is small.
	if _, err := List(t.Context(), Source{URL: p}, time.Now(), nil); err != nil {
		t.Fatalf("List: %v", err)
	}
}

// runtimeMem is the total the runtime allocated, read after a GC.
type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	m.total = ms.TotalAlloc
}

// TestEventObjectsBoundedTogether: objects each under MaxRecord are still
// refused once they hold more than the bound together, since anyone who
// can append to the record can add as many as they like.
func TestEventObjectsBoundedTogether(t *testing.T) {
	f := newFake()
	var keys []string
	for i := range 10 {
		k := fmt.Sprintf("runs/r/events/%02d", i)
		f.objs[k] = make([]byte, 1000)
		keys = append(keys, k)
	}
	if _, err := getAllAtMost(t.Context(), f, keys, 10*1000); err != nil {
		t.Fatalf("10 objects of 1000 bytes within 10000: %v", err)
	}
	_, err := getAllAtMost(t.Context(), f, keys, 10*1000-1)
	if !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "10 event objects together") {
		t.Fatalf("10 objects of 1000 bytes within 9999: %v; want refused as too large together", err)
	}
}
