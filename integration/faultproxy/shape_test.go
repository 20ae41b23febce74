package faultproxy

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestPacerSchedule: a pacer lets n bytes through by start + n/rate,
// counting from its own start only.
func TestPacerSchedule(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := pacer{start: t0, rate: 1e6}
	b := pacer{start: t0.Add(100 * time.Millisecond), rate: 1e6}
	for i, want := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second} {
		n := []int{250_000, 250_000, 500_000}[i]
		if got := a.due(n).Sub(t0); got != want {
			t.Errorf("a: %d bytes in: due at +%v, want +%v", a.sent, got, want)
		}
	}
	// Another response, paced at the same time, is not slowed by a's bytes.
	if got := b.due(500_000).Sub(t0); got != 600*time.Millisecond {
		t.Errorf("b: due at +%v, want +600ms (its own start + 0.5 s)", got)
	}
}

// blobServer serves blob to every GET, with no signature check.
func blobServer(t *testing.T, blob []byte) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(blob))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func shapedProxy(t *testing.T, target string, s Shape) *Proxy {
	t.Helper()
	p, err := New(target, Options{Shape: s})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func randomBlob(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{7}).Read(b)
	return b
}

// timedGet GETs url and returns the body, the time to the response
// headers and the time to the last body byte.
func timedGet(t *testing.T, url string) ([]byte, time.Duration, time.Duration) {
	t.Helper()
	start := time.Now()
	resp, err := http.Get(url)
	if err != nil {
		t.Error(err)
		return nil, 0, 0
	}
	defer resp.Body.Close()
	first := time.Since(start)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Error(err)
	}
	return b, first, time.Since(start)
}

// TestShapeLatencyAndRate: a shaped response of N bytes arrives intact,
// no sooner than the latency for its headers and latency + N/rate for its
// last byte.
func TestShapeLatencyAndRate(t *testing.T) {
	blob := randomBlob(300_000 + 12345) // not a multiple of the chunk
	s := Shape{Latency: 50 * time.Millisecond, Rate: 1e6}
	p := shapedProxy(t, blobServer(t, blob), s)
	b, first, all := timedGet(t, p.URL()+"/b/k")
	if !bytes.Equal(b, blob) {
		t.Fatalf("shaped body: %d bytes, differs from the %d sent", len(b), len(blob))
	}
	if first < s.Latency {
		t.Errorf("headers after %v, want at least the latency %v", first, s.Latency)
	}
	if want := s.Latency + time.Duration(float64(len(blob))/s.Rate*float64(time.Second)); all < want {
		t.Errorf("%d bytes in %v, want at least latency + N/rate = %v", len(blob), all, want)
	}
	// A range is paced by its own length.
	req, _ := http.NewRequest("GET", p.URL()+"/b/k", nil)
	req.Header.Set("Range", "bytes=1000-100999")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, blob[1000:101000]) {
		t.Fatalf("shaped range: %d bytes, %v", len(got), err)
	}
	if d := time.Since(start); d < s.Latency+100*time.Millisecond {
		t.Errorf("100 kB range in %v, want at least 150ms", d)
	}
}

// TestShapePacesResponsesIndependently: two responses at once each get
// the whole rate: the pair ends long before 2·N/rate, when one shared cap
// would end it (the margin is more than a second, so a loaded machine
// cannot make it fail).
func TestShapePacesResponsesIndependently(t *testing.T) {
	blob := randomBlob(384_000)
	s := Shape{Rate: 256_000} // 1.5 s per response
	p := shapedProxy(t, blobServer(t, blob), s)
	one := time.Duration(float64(len(blob)) / s.Rate * float64(time.Second))
	var wg sync.WaitGroup
	alls := make([]time.Duration, 2)
	start := time.Now()
	for i := range alls {
		wg.Go(func() {
			b, _, all := timedGet(t, p.URL()+"/b/k")
			if !bytes.Equal(b, blob) {
				t.Errorf("response %d: body differs", i)
			}
			alls[i] = all
		})
	}
	wg.Wait()
	pair := time.Since(start)
	for i, all := range alls {
		if all < one {
			t.Errorf("response %d took %v, want at least N/rate = %v", i, all, one)
		}
	}
	if shared := 2 * one; pair >= shared-shared/8 {
		t.Errorf("two parallel responses took %v together; one shared cap would take %v, independent ones %v", pair, shared, one)
	}
}

// TestShapeKeepsFaults: the faults work through a shaped proxy: a flipped
// bit is flipped once, a cut body is cut where it should be, and the rest
// of the body is intact.
func TestShapeKeepsFaults(t *testing.T) {
	p, c, _ := setupShaped(t, Shape{Latency: 5 * time.Millisecond, Rate: 10e6})
	p.Inject(Rule{Fault: FlipBitAt(9000), Times: 1})
	_, b, err := get(t.Context(), c, "v1", "")
	want := bytes.Clone(objects["v1"])
	want[9000] ^= 1
	if err != nil || !bytes.Equal(b, want) {
		t.Fatalf("shaped flip: %d bytes, %v; want the object with bit 0 of byte 9000 flipped", len(b), err)
	}
	p.Inject(Rule{Fault: CutAfter(5000), Times: 1})
	if _, b, err := get(t.Context(), c, "v1", ""); err == nil || !bytes.Equal(b, objects["v1"][:5000]) {
		t.Fatalf("shaped cut: %d bytes, %v; want 5000 and an error", len(b), err)
	}
	if _, b, err := get(t.Context(), c, "v2", "bytes=100-199"); err != nil || !bytes.Equal(b, objects["v2"][100:200]) {
		t.Fatalf("shaped GET after the faults: %v", err)
	}
}
