package consumed

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
)

// randomSet returns a set with members up to n: runs, scattered members,
// dense stretches (bitmap containers) and parts of every shape.
func randomSet(r *rand.Rand, n uint32) *Set {
	s := NewSet()
	for range r.IntN(4) {
		lo := r.Uint32N(n)
		s.Full.AddRange(uint64(lo), uint64(min(n, lo+r.Uint32N(70000))))
	}
	for range r.IntN(3000) {
		s.Full.Add(r.Uint32N(n))
	}
	if r.IntN(2) == 0 { // dense: more than 4096 in one container
		base := r.Uint32N(n/65536+1) * 65536
		for range 6000 {
			s.Full.Add(min(n-1, base+r.Uint32N(65536)))
		}
	}
	for range r.IntN(500) {
		s.Opened.Add(r.Uint32N(n))
	}
	for range r.IntN(200) {
		i := r.Uint32N(n)
		if s.Full.Contains(i) {
			continue
		}
		p := roaring.New()
		switch r.IntN(3) {
		case 0:
			p.AddRange(0, uint64(1+r.IntN(100000)))
		case 1:
			for range 1 + r.IntN(50) {
				p.Add(r.Uint32N(1 << 20))
			}
		default:
			p.Add(r.Uint32())
		}
		s.Parts[i] = p
	}
	s.Opened.Or(s.Full)
	for i := range s.Parts {
		s.Opened.Add(i)
	}
	return s
}

func TestEncodeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	cases := []*Set{NewSet(), set([]uint32{0}, nil, nil), set(nil, []uint32{1<<32 - 1}, nil),
		set(nil, nil, map[uint32][]uint32{5: {0, 1<<32 - 1}})}
	for k := range 40 {
		n := uint32(1000)
		if k%2 == 1 {
			n = 1 << 31
		}
		cases = append(cases, randomSet(r, n))
	}
	for k, s := range cases {
		text := s.Encode()
		if !strings.HasPrefix(text, "c1.") || strings.ContainsAny(text, "\"\\+/= \n") {
			t.Fatalf("case %d: text %.40q... is not versioned URL-safe base64", k, text)
		}
		got, err := decode(text)
		if err != nil {
			t.Fatalf("case %d: Decode: %v", k, err)
		}
		checkInvariants(t, got)
		if !equal(got, s) {
			t.Fatalf("case %d: round trip\n got %.300s\nwant %.300s", k, describe(got), describe(s))
		}
		if again := got.Encode(); again != text {
			t.Fatalf("case %d: encoding is not stable", k)
		}
	}
}

// uvarints returns the binary form holding vs, as uvarints, deflated
// and in text.
func uvarints(vs ...uint64) string {
	var bin []byte
	for _, v := range vs {
		bin = binary.AppendUvarint(bin, v)
	}
	return deflated(bin)
}

func deflated(bin []byte) string {
	var z bytes.Buffer
	w, _ := flate.NewWriter(&z, flate.BestSpeed)
	w.Write(bin)
	w.Close()
	return version + b64.EncodeToString(z.Bytes())
}

func TestDecodeErrors(t *testing.T) {
	const empty = 0 // a bitmap of no runs
	tests := []struct {
		name, text, want string
	}{
		{"empty", "", "unknown version"},
		{"wrong version", "c2." + strings.TrimPrefix(NewSet().Encode(), "c1."), `unknown version "c2"`},
		{"garbage", "c1.!!!!", "illegal base64"},
		{"not deflate", "c1." + b64.EncodeToString([]byte("hello, world")), "inflate"},
		{"no bitmaps", deflated(nil), "opened bitmap cut short"},
		{"two bitmaps", uvarints(empty, empty), "parts' members bitmap cut short"},
		{"uvarint overflow", deflated(bytes.Repeat([]byte{0xff}, 11)), "cut short"},
		{"more runs than bytes", uvarints(1000, 1, 0), "1000 runs in 2 bytes"},
		{"run cut short", uvarints(2, 1, 1, 300), "opened bitmap cut short"},
		{"touching runs", uvarints(2, 1, 0, 0, 0, empty, empty), "touching runs"},
		{"beyond 32 bits", uvarints(1, 1<<32-1, 1, empty, empty), "beyond 32 bits"},
		{"huge gap", uvarints(1, 1<<40, 0, empty, empty), "beyond 32 bits"},
		{"huge length", uvarints(1, 0, 1<<40, empty, empty), "beyond 32 bits"},
		{"full and opened overlap", uvarints(1, 3, 0, 1, 3, 0, empty), "overlap"},
		{"full and parts overlap", uvarints(empty, 1, 3, 0, 1, 3, 0, 1, 0, 0), "overlap"},
		{"too few bytes for the parts", uvarints(empty, empty, 1, 1, 1, 1, 0, 0), "2 parts in 3 bytes"},
		{"part cut short", uvarints(empty, empty, 1, 1, 1, 1, 0, 0, 2, 0, 1, 300), "part bitmap cut short"},
		{"empty part", uvarints(empty, empty, 1, 1, 0, empty, 1, 0, 0), "member 1 has an empty part"},
		{"bytes after the parts", uvarints(empty, empty, 1, 1, 0, 1, 0, 0, 7), "1 bytes after the last part"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := decode(tc.text)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode = %v, %v; want an error with %q", s, err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
	// Valid input of the same shapes decodes to what it says, so the cases
	// above fail for the reason they name.
	s, err := decode(uvarints(1, 5, 0, 2, 0, 1, 0, 1, 1, 1, 0, 2, 0, 3, 2, 3))
	want := set([]uint32{5}, []uint32{0, 2, 3}, map[uint32][]uint32{1: {0, 1, 2, 6, 7, 8, 9}})
	if err != nil || !equal(s, want) {
		t.Fatalf("valid input: %v, %v; want %s", s, err, describe(want))
	}
	if _, err := decode(uvarints(1, 1<<32-1, 0, empty, empty)); err != nil {
		t.Fatalf("the largest member index: %v", err)
	}
}

func TestDecodeBomb(t *testing.T) {
	defer func(n int) { maxInflated = n }(maxInflated)
	maxInflated = 1 << 20
	if _, err := decode(deflated(make([]byte, maxInflated+1))); err == nil || !strings.Contains(err.Error(), "inflated") {
		t.Fatalf("Decode of a bomb = %v, want the inflated size refused", err)
	}
	if _, err := decode(deflated(make([]byte, maxInflated))); err == nil || strings.Contains(err.Error(), "inflated") {
		t.Fatalf("Decode at the limit = %v, want it read (and refused as malformed)", err)
	}
}

func TestDecodeThenCheck(t *testing.T) {
	s, err := decode(set(nil, []uint32{2, 1000}, nil).Encode())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(1000); err == nil || !strings.Contains(err.Error(), "1000") {
		t.Fatalf("Check(1000) = %v, want index 1000 refused", err)
	}
	if err := s.Check(1001); err != nil {
		t.Fatalf("Check(1001) = %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 4 {
		f.Add(randomSet(r, 5000).Encode())
	}
	f.Add(NewSet().Encode())
	f.Add(uvarints(1, 5, 0, 2, 0, 1, 0, 1, 1, 1, 0, 2, 0, 3, 2, 3))
	f.Add("c1.")
	f.Add("c1.AAAA")
	f.Add(set([]uint32{99}, []uint32{3}, map[uint32][]uint32{50: {0, 60}}).Encode())
	f.Fuzz(func(t *testing.T, text string) {
		s, err := decode(text)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		checkInvariants(t, s)
		again, err := decode(s.Encode())
		if err != nil || !equal(again, s) {
			t.Fatalf("re-encoding %s: %v", describe(s), err)
		}
		s.Summarize(tableOf(100))
		_ = s.Check(100)
		// Against a table, what is accepted fits it: a tracker of that
		// table takes it as a seed.
		tab := tableOf(100)
		if s, err := NewDecoder(tab).Decode(text); err == nil {
			if err := NewTracker(tab).Seed(s); err != nil {
				t.Fatalf("a set the table's Decoder accepted does not fit the table: %v", err)
			}
		}
	})
}
