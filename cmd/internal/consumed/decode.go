package consumed

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/pinfs/pinfs/verify"
)

// maxInflated bounds the binary form Decode inflates, whatever the table: a
// record that claims more is refused rather than read into memory. A set of
// 1M members each read in one stretch takes about 5 MB. Tests lower it.
var maxInflated = 256 << 20

// What a decoded set costs, in units of about 16 bytes of memory: a run of
// any bitmap costs one, a member read in part (its bitmap and map entry)
// partCost more.
const partCost = 16

// The cap on a run's consumed events together (see Decoder): runFactor
// sets of the table's worth, and perTextByte units for every byte of their
// text.
const (
	runFactor   = 8
	perTextByte = 8
)

// minRuns is the fewest bytes a non-empty bitmap takes: a count, a gap
// and a length.
const minRuns = 3

// A Decoder reads the text form Encode writes, for the consumed events of
// one run of a snapshot whose member table it was made for. It checks
// every byte, never panics, and its errors are one line. It refuses,
// before it allocates for them:
//
//   - a member index that is not below the table's length, and a granule
//     of a member that is not below its size (an empty member has none);
//   - a set that inflates to more than such a set can take, or costs more
//     than the largest set the table allows (each member read in part, in
//     every other granule: the table's worth);
//   - sets that together cost more than runFactor (8) times the table's
//     worth plus perTextByte (8) units a byte of their text: what the
//     deltas of a run add up to however many mounts wrote them, unless a
//     deflate bomb repeats a big set in a few bytes.
//
// A run's consumed set, and what a resuming mount seeds itself with, thus
// take memory bounded by its table (or by the record's own size), however
// the record was written. A Decoder is not safe for concurrent use.
type Decoder struct {
	members  uint64
	granules func(i uint32) uint64 // how many granules member i has
	worth    int64                 // the cost of the largest set the table allows
	left     int64                 // what the run's sets may still cost
}

// NewDecoder returns a Decoder for the consumed sets of one run of the
// snapshot whose member table is t. It reads every member's size once.
func NewDecoder(t *verify.Table) *Decoder {
	n := int64(t.Len())
	worth := partCost*n + 2*n + 3 // members in part, the member bitmaps' runs
	for i := range t.Len() {
		worth += (granulesOf(t.Size(i)) + 1) / 2 // every other granule
	}
	return &Decoder{
		members:  uint64(n),
		granules: func(i uint32) uint64 { return uint64(granulesOf(t.Size(int(i)))) },
		worth:    worth,
		left:     runFactor * worth,
	}
}

// granulesOf returns how many granules a member of size bytes has.
func granulesOf(size int64) int64 { return (max(size, 0) + Granule - 1) / Granule }

// Decode returns the set text encodes, checked against the table as the
// Decoder's doc says. The set it returns keeps the invariants of Set.
func (dc *Decoder) Decode(text string) (s *Set, err error) {
	defer func() {
		if r := recover(); r != nil { // not expected: the decoder checks bounds
			s, err = nil, fmt.Errorf("consumed set: malformed: %v", r)
		}
	}()
	dc.left = min(dc.left+perTextByte*int64(len(text)), math.MaxInt64/4)
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
	// A run takes two uvarints and a bitmap one, ten bytes at most each:
	// 20 bytes a unit bound the binary form of a set of the table's worth.
	limit := int64(maxInflated)
	if dc.worth < (limit-64)/20 {
		limit = 20*dc.worth + 64
	}
	bin, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(z)), limit+1))
	if err != nil {
		return nil, fmt.Errorf("consumed set: inflate: %w", err)
	}
	if int64(len(bin)) > limit {
		return nil, fmt.Errorf("consumed set: more than %d bytes inflated, the most a set of the table's %d members takes", limit, dc.members)
	}
	d := decoder{bin: bin, left: min(dc.worth, dc.left), dc: dc}
	defer func() { dc.left -= min(dc.worth, dc.left) - d.left }()
	only, full, keys := d.runs("opened", dc.members, -1), d.runs("full", dc.members, -1), d.runs("parts' members", dc.members, -1)
	if d.err != nil {
		return nil, d.err
	}
	if only.Intersects(full) || only.Intersects(keys) || full.Intersects(keys) {
		return nil, errors.New("consumed set: malformed: opened, full and parts' members overlap")
	}
	// Each part takes at least minRuns bytes: do not trust the count
	// beyond what the input can hold, nor beyond what is left to spend.
	n := keys.GetCardinality()
	if n > uint64(len(d.bin))/minRuns {
		return nil, fmt.Errorf("consumed set: malformed: %d parts in %d bytes", n, len(d.bin))
	}
	if d.spend(int64(n) * partCost); d.err != nil {
		return nil, d.err
	}
	s = &Set{Full: full, Parts: make(map[uint32]*roaring.Bitmap, n)}
	keys.Iterate(func(i uint32) bool {
		p := d.runs("part", dc.granules(i), int64(i))
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

// decoder reads bitmaps off bin, spending left on them; after the first
// error it reads nothing.
type decoder struct {
	bin  []byte
	left int64
	dc   *Decoder
	err  error
}

// spend takes cost from what is left, or sets the error naming the cap
// that would be passed.
func (d *decoder) spend(cost int64) {
	if d.err != nil || cost <= d.left {
		d.left -= cost
		return
	}
	if d.dc.left < d.dc.worth { // the run's cap binds, not the set's
		d.err = fmt.Errorf("consumed set: the run's consumed sets cost more than %d units in all "+
			"(%d times the most one set of the table's %d members can hold, and %d a byte of their text)",
			runFactor*d.dc.worth, runFactor, d.dc.members, perTextByte)
		return
	}
	d.err = fmt.Errorf("consumed set: costs more than %d units, the most a set of the table's %d members can hold", d.dc.worth, d.dc.members)
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

// runs reads the next bitmap, the one called what (see appendRuns): of
// member indices below limit, or with member >= 0 of that member's
// granules, of which it has limit.
func (d *decoder) runs(what string, limit uint64, member int64) *roaring.Bitmap {
	b := roaring.New()
	n := d.uvarint(what)
	switch {
	case d.err != nil:
	case n > uint64(len(d.bin))/2: // each run takes 2 bytes or more
		d.err = fmt.Errorf("consumed set: malformed: %s bitmap of %d runs in %d bytes", what, n, len(d.bin))
	case n > (limit+1)/2 && member < 0: // runs do not touch
		d.err = fmt.Errorf("consumed set: %s bitmap of %d runs, more than the table's %d members can hold", what, n, limit)
	case n > (limit+1)/2:
		d.err = fmt.Errorf("consumed set: part of member %d of %d runs, more than its %d granules can hold", member, n, limit)
	default:
		d.spend(int64(n))
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
		case end+gap+length+1 > limit:
			d.err = d.beyond(what, limit, member, fmt.Sprint(end+gap+length))
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

// beyond returns the error for a bitmap (see runs) that names got,
// beyond its limit.
func (d *decoder) beyond(what string, limit uint64, member int64, got string) error {
	if member < 0 {
		return fmt.Errorf("consumed set: %s bitmap names member %s, beyond the table's %d members", what, got, limit)
	}
	return fmt.Errorf("consumed set: part of member %d names granule %s, beyond its %d granules", member, got, limit)
}
