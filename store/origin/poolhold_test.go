package origin

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pinfs/pinfs/store/pool"
)

// other is what churnWriter fills free slots with.
var other = bytes.Repeat([]byte{0x77}, pool.SlotSize)

// churnWriter is a ResponseWriter that, before it takes the body's bytes,
// fills every free slot of a pool with other bytes: a response whose
// block had gone back to the pool before it was written would carry
// them (and a pooldebug build would panic at the slot's reuse).
type churnWriter struct {
	*httptest.ResponseRecorder
	p      *pool.Pool
	serve  int64 // references held by pinfs serve's responses, seen at the first Write
	writes int
}

func (w *churnWriter) Write(b []byte) (int, error) {
	if w.writes == 0 {
		w.serve = w.p.Stats().InUse["serve"]
	}
	w.writes++
	var held []*pool.Block
	for {
		s, ok := w.p.TryGet(pool.SlotSize, pool.Flight)
		if !ok {
			break
		}
		copy(s.Bytes(), other)
		held = append(held, s)
	}
	for _, s := range held {
		s.Release(pool.Flight)
	}
	return w.ResponseRecorder.Write(b)
}

// A block response holds its block in the pool (pool.Serve) until it is
// written, and gives it back after.
func TestResponseHoldsItsBlock(t *testing.T) {
	f := newFixture(t, Config{})
	p := f.h.cfg.Blocks.Pool()
	req, _ := http.NewRequest("GET", f.block(0, 1), nil)
	w := &churnWriter{ResponseRecorder: httptest.NewRecorder(), p: p}
	f.h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	want := f.data[0][1<<20 : 2<<20]
	if !bytes.Equal(w.Body.Bytes(), want) {
		t.Fatal("the response's bytes changed while it was written: its block was not held")
	}
	if w.serve < 1 {
		t.Fatalf("%d references held by the response while it was written, want 1", w.serve)
	}
	if n := p.Stats().InUse["serve"]; n != 0 {
		t.Fatalf("%d references still held by responses after the write", n)
	}
}
