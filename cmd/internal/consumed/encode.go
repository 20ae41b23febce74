package consumed

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
)

// version is the prefix of the text form; a new binary layout gets a new one.
const version = "c1."

// maxInflated bounds the binary form Decode inflates: a record that claims
// more is refused rather than read into memory. A set of 1M members each
// read in one stretch takes about 5 MB. Tests lower it.
var maxInflated = 256 << 20

var b64 = base64.RawURLEncoding

// Encode returns the compact text form of s (see the package doc): safe in
// JSON and URLs, and read back by Decode. The same set always has the same
// text.
func (s *Set) Encode() string {
	keys := make([]uint32, 0, len(s.Parts))
	for i, p := range s.Parts {
		if !s.Full.Contains(i) && !p.IsEmpty() {
			keys = append(keys, i)
		}
	}
	slices.Sort(keys)
	partKeys := roaring.BitmapOf(keys...)
	only := roaring.AndNot(s.Opened, s.Full)
	only.AndNot(partKeys)

	var bin []byte
	bin = appendRuns(bin, only)
	bin = appendRuns(bin, s.Full)
	bin = appendRuns(bin, partKeys)
	for _, i := range keys {
		bin = appendRuns(bin, s.Parts[i])
	}

	var z bytes.Buffer
	z.WriteString(version)
	enc := base64.NewEncoder(b64, &z)
	w, _ := flate.NewWriter(enc, flate.BestCompression) // the level is valid
	_, _ = w.Write(bin)                                 // a bytes.Buffer does not fail
	_ = w.Close()
	_ = enc.Close()
	return z.String()
}

// appendRuns appends b as runs: their count, then for each the gap from
// the end of the one before (from 0 for the first; at least 1 after it,
// as runs do not touch), then for each its length minus one, all
// uvarints. Gaps and lengths apart deflate better: in a scattered set,
// the lengths are a long stretch of zeros.
func appendRuns(bin []byte, b *roaring.Bitmap) []byte {
	var starts, ends []uint64 // ends exclusive
	buf := make([]uint32, 1024)
	it := b.ManyIterator()
	for n := it.NextMany(buf); n > 0; n = it.NextMany(buf) {
		for _, v := range buf[:n] {
			if k := len(ends) - 1; k >= 0 && ends[k] == uint64(v) {
				ends[k]++
			} else {
				starts, ends = append(starts, uint64(v)), append(ends, uint64(v)+1)
			}
		}
	}
	bin = binary.AppendUvarint(bin, uint64(len(starts)))
	prev := uint64(0)
	for k, start := range starts {
		bin = binary.AppendUvarint(bin, start-prev)
		prev = ends[k]
	}
	for k, start := range starts {
		bin = binary.AppendUvarint(bin, ends[k]-start-1)
	}
	return bin
}

// Decode reads the text form Encode writes. It checks every byte, never
// panics, and refuses a binary form larger than maxInflated; its error is
// one line. The set it returns keeps the invariants of Set.
func Decode(text string) (s *Set, err error) {
	defer func() {
		if r := recover(); r != nil { // not expected: the decoder checks bounds
			s, err = nil, fmt.Errorf("consumed set: malformed: %v", r)
		}
	}()
	rest, ok := strings.CutPrefix(text, version)
	if !ok {
		v, _, _ := strings.Cut(text, ".")
		if len(v) > 16 {
			v = v[:16] + "..."
		}
		return nil, fmt.Errorf("consumed set: unknown version %q, want %q", v, strings.TrimSuffix(version, "."))
	}
	z, err := b64.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("consumed set: %w", err)
	}
	bin, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(z)), int64(maxInflated)+1))
	if err != nil {
		return nil, fmt.Errorf("consumed set: inflate: %w", err)
	}
	if len(bin) > maxInflated {
		return nil, fmt.Errorf("consumed set: more than %d bytes inflated", maxInflated)
	}
	d := decoder{bin: bin}
	only, full, keys := d.runs("opened"), d.runs("full"), d.runs("parts' members")
	if d.err != nil {
		return nil, d.err
	}
	if only.Intersects(full) || only.Intersects(keys) || full.Intersects(keys) {
		return nil, errors.New("consumed set: malformed: opened, full and parts' members overlap")
	}
	// Each part takes at least minRuns bytes: do not trust the count
	// beyond what the input can hold.
	n := keys.GetCardinality()
	if n > maxParts {
		return nil, fmt.Errorf("consumed set: %d members read in part, more than %d", n, maxParts)
	}
	if n > uint64(len(d.bin))/minRuns {
		return nil, fmt.Errorf("consumed set: malformed: %d parts in %d bytes", n, len(d.bin))
	}
	s = &Set{Full: full, Parts: make(map[uint32]*roaring.Bitmap, n)}
	keys.Iterate(func(i uint32) bool {
		p := d.runs("part")
		if d.err == nil && p.IsEmpty() {
			d.err = fmt.Errorf("consumed set: malformed: member %d has an empty part", i)
		}
		s.Parts[i] = p
		return d.err == nil
	})
	if d.err != nil {
		return nil, d.err
	}
	if len(d.bin) != 0 {
		return nil, fmt.Errorf("consumed set: malformed: %d bytes after the last part", len(d.bin))
	}
	s.Opened = roaring.FastOr(only, full, keys)
	return s, nil
}

// maxParts bounds the members read in part that Decode accepts: each
// takes a few hundred bytes of memory, from 3 bytes of input.
const maxParts = 1 << 24

// minRuns is the fewest bytes a non-empty bitmap takes: a count, a gap
// and a length.
const minRuns = 3

// decoder reads bitmaps off bin; after the first error it reads nothing.
type decoder struct {
	bin []byte
	err error
}

// uvarint reads one uvarint of the bitmap called what.
func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Uvarint(d.bin)
	if k <= 0 {
		d.err = fmt.Errorf("consumed set: malformed: %s bitmap cut short", what)
		return 0
	}
	d.bin = d.bin[k:]
	return v
}

// runs reads the next bitmap, the one called what (see appendRuns).
func (d *decoder) runs(what string) *roaring.Bitmap {
	b := roaring.New()
	n := d.uvarint(what)
	if d.err == nil && n > uint64(len(d.bin))/2 { // each run takes 2 bytes or more
		d.err = fmt.Errorf("consumed set: malformed: %s bitmap of %d runs in %d bytes", what, n, len(d.bin))
	}
	if d.err != nil {
		return b
	}
	// The gaps come first, then the lengths: read both at once.
	gaps := decoder{bin: d.bin}
	for range n {
		d.uvarint(what)
	}
	var single []uint32 // runs of one value, added in batches
	end := uint64(0)
	for k := uint64(0); k < n && d.err == nil; k++ {
		gap, length := gaps.uvarint(what), d.uvarint(what)
		switch {
		case d.err != nil:
		case k > 0 && gap == 0:
			d.err = fmt.Errorf("consumed set: malformed: %s bitmap has touching runs", what)
		case gap > math.MaxUint32 || length > math.MaxUint32 || end+gap+length+1 > 1<<32:
			d.err = fmt.Errorf("consumed set: malformed: %s bitmap beyond 32 bits", what)
		case length == 0:
			single = append(single, uint32(end+gap))
			end += gap + 1
		default:
			b.AddMany(single)
			single = single[:0]
			b.AddRange(end+gap, end+gap+length+1)
			end += gap + length + 1
		}
	}
	b.AddMany(single)
	return b
}
