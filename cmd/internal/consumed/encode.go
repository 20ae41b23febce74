package consumed

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/binary"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
)

// version is the prefix of the text form; a new binary layout gets a new one.
const version = "c1."

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
