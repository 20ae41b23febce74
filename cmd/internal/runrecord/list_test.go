package runrecord

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestListHugeSetIsCheap: List skips a consumed line's payload without
// keeping or decoding it, yet counts the event.
func TestListHugeSetIsCheap(t *testing.T) {
	const size = 64 << 20
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	start := ev("big", RunStart, 0, "h2", 10, 1)
	start.FlushInterval = "1m"
	writeLines(t, p, "", start, consumedEv("big", 30, "h2", 10, 2, strings.Repeat("A", size)), ev("big", RunEnd, 31, "h2", 10, 3))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	infos, err := List(t.Context(), Source{URL: p}, at(40), nil)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].State != StateEnded || !infos[0].Last.Equal(at(31)) || infos[0].Mounts != 1 {
		t.Fatalf("list %+v", infos)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/8 {
		t.Fatalf("List allocated %d bytes for a record with a %d-byte set", alloc, size)
	}

	// The same line torn inside its set is not an event.
	data, _ := os.ReadFile(p)
	i := bytes.Index(data, []byte(`,"set":`)) + 100
	torn := append(bytes.Clone(data[:i]), '\n') // as appendLine ends a torn line
	torn = append(torn, lineOf(t, ev("big", RunEnd, 32, "h2", 10, 3))...)
	if err := os.WriteFile(p, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	infos, err = List(t.Context(), Source{URL: p}, at(40), nil)
	if err != nil || len(infos) != 1 || !infos[0].Last.Equal(at(32)) {
		t.Fatalf("with a torn set: %+v, %v", infos, err)
	}
	if r, err := ReadRun(t.Context(), Source{URL: p}, "big"); err != nil || kinds(r.Events) != "run_start,run_end" || r.Torn != 1 {
		t.Fatalf("ReadRun with a torn set: %+v, %v", r, err)
	}
}

// TestLineScannerBoundaries: cutting lines through a tiny buffer, with the
// payload mark across every chunk boundary, gives what cutting them whole
// does.
func TestLineScannerBoundaries(t *testing.T) {
	var data bytes.Buffer
	var want []string
	for i := range 40 {
		e := consumedEv("r", float64(i), "h", 1, int64(i), strings.Repeat("s", i))
		if i%3 == 0 {
			e.Members = []Consumed{{Path: strings.Repeat("p", i)}}
		}
		if i%5 == 0 {
			e.Set, e.Event, e.Path = "", Mismatch, strings.Repeat(`"set":,`, i)
		}
		line := lineOf(t, e)
		data.Write(line)
		head, ok := parseHead(line)
		if !ok {
			t.Fatalf("line %d does not parse: %s", i, line)
		}
		want = append(want, headKey(&head)+head.Path)
	}
	data.WriteString("\n  \n")
	for _, size := range []int{16, 17, 23, 64} {
		sc := &lineScanner{br: bufio.NewReaderSize(bytes.NewReader(data.Bytes()), size), max: maxLine}
		var got []string
		for {
			line, ok, err := sc.next(true)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			e, parsed := parseLine(line)
			if !ok || !parsed || e.Set != "" || e.Members != nil {
				t.Fatalf("buffer %d: %q: ok %v parsed %v", size, line, ok, parsed)
			}
			got = append(got, headKey(&e)+e.Path)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("buffer %d: heads\n%s\nwant\n%s", size, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// BenchmarkList300Runs lists a record file of 300 ended runs, each with
// four 64 KiB consumed deltas and a few integrity events.
func BenchmarkList300Runs(b *testing.B) {
	p := filepath.Join(b.TempDir(), "runs.jsonl")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	set := strings.Repeat("Q", 64<<10)
	for i := range 300 {
		id := fmt.Sprintf("run-%03d", i)
		m := float64(i)
		es := []Event{ev(id, RunStart, m, "h", 1, 1), ev(id, Mismatch, m+0.1, "h", 1, 2)}
		for j := range 4 {
			es = append(es, consumedEv(id, m+0.2+float64(j)/10, "h", 1, int64(3+j), set))
		}
		es = append(es, ev(id, FetchFailed, m+0.7, "h", 1, 7), ev(id, RunEnd, m+0.8, "h", 1, 8))
		for _, e := range es {
			w.Write(lineOf(b, e))
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	fi, _ := f.Stat()
	f.Close()
	b.SetBytes(fi.Size())
	now := time.Now()
	b.ResetTimer()
	for b.Loop() {
		infos, err := List(b.Context(), Source{URL: p}, now, nil)
		if err != nil || len(infos) != 300 || infos[299].State != StateEnded || infos[0].Integrity[Mismatch] != 1 {
			b.Fatalf("list: %d runs, %v", len(infos), err)
		}
	}
}
