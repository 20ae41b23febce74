package consumed

import (
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/pinfs/pinfs/verify"
)

// Legacy is one entry of an old consumed event's "members" list (records
// written before the compact set).
type Legacy struct {
	Path  string
	Bytes int64
	Full  bool
}

// FromLegacy returns the set that ms, an old consumed event's members,
// describe, with indices found by path in one pass over t. A member read
// in full, or of as many bytes as its size, is Full; a member read in part
// gets its first ceil(bytes/Granule) granules: its byte count was exact,
// which bytes it was is not known. A path not in t is an error.
func FromLegacy(t *verify.Table, ms []Legacy) (*Set, error) {
	s := NewSet()
	want := make(map[string][]int, len(ms)) // path -> its entries in ms
	for k := range ms {
		want[ms[k].Path] = append(want[ms[k].Path], k)
	}
	for i := 0; i < t.Len() && len(want) > 0; i++ {
		p := t.Path(i)
		ks, ok := want[p]
		if !ok {
			continue
		}
		delete(want, p)
		size := t.Size(i)
		for _, k := range ks {
			s.addLegacy(uint32(i), size, ms[k])
		}
	}
	for k := range ms {
		if _, missing := want[ms[k].Path]; missing {
			return nil, fmt.Errorf("legacy consumed member %q is not in the member table", ms[k].Path)
		}
	}
	return s, nil
}

// addLegacy adds m, member i of size bytes, to s.
func (s *Set) addLegacy(i uint32, size int64, m Legacy) {
	s.Opened.Add(i)
	if m.Full || m.Bytes >= size {
		s.Full.Add(i)
		delete(s.Parts, i)
		return
	}
	if m.Bytes <= 0 || s.Full.Contains(i) {
		return
	}
	p := s.Parts[i]
	if p == nil {
		p = roaring.New()
		s.Parts[i] = p
	}
	p.AddRange(0, uint64((m.Bytes+Granule-1)/Granule))
}
