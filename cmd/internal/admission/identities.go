package admission

import (
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"slices"

	"github.com/pinfs/pinfs/verify"
)

// identities is the set of the member identities of the trusted parents
// a validation inherits from. It keeps a seeded 64-bit hash of each and
// the member it came from, 16 bytes a parent member, rather than a map of
// identities with their strings (a few hundred bytes each: gigabytes for
// a parent of ten million members). A lookup confirms every hash match
// against the parent member itself, so a collision, chosen or not, costs
// a comparison and never inherits a digest that was not vouched for.
type identities struct {
	seed   maphash.Seed
	tables []*verify.Table
	ents   []identity // sorted by hash
}

type identity struct {
	hash     uint64
	table, i int32 // a table within store.MaxTable has < 2^31 members
}

func newIdentities() *identities { return &identities{seed: maphash.MakeSeed()} }

// add adds every member of t.
func (s *identities) add(t *verify.Table) {
	k := int32(len(s.tables))
	s.tables = append(s.tables, t)
	s.ents = slices.Grow(s.ents, t.Len())
	for j := range t.Len() {
		m := t.Member(j)
		s.ents = append(s.ents, identity{s.hash(identityOf(&m)), k, int32(j)})
	}
}

// seal sorts the set after the last add and before the first has.
func (s *identities) seal() {
	slices.SortFunc(s.ents, func(x, y identity) int { return cmp.Compare(x.hash, y.hash) })
}

// has reports whether a parent has a member of identity id.
func (s *identities) has(id memberIdentity) bool {
	h := s.hash(id)
	k, _ := slices.BinarySearchFunc(s.ents, h, func(e identity, h uint64) int { return cmp.Compare(e.hash, h) })
	for ; k < len(s.ents) && s.ents[k].hash == h; k++ {
		e := s.ents[k]
		if m := s.tables[e.table].Member(int(e.i)); identityOf(&m) == id {
			return true
		}
	}
	return false
}

func (s *identities) hash(id memberIdentity) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	var n [binary.MaxVarintLen64]byte
	for _, f := range [...]string{id.bucket, id.key, id.version, id.cas, id.digest} {
		h.Write(binary.AppendUvarint(n[:0], uint64(len(f))))
		h.WriteString(f)
	}
	h.Write(binary.AppendVarint(n[:0], id.size))
	return h.Sum64()
}

// pathWalk tells whether a path is in one of the trusted parents, for
// paths asked in increasing order (a verified table's order): one cursor
// per parent table, which only moves forward.
type pathWalk struct {
	tables []*verify.Table
	at     []int
}

func (w *pathWalk) add(t *verify.Table) {
	w.tables = append(w.tables, t)
	w.at = append(w.at, 0)
}

// has reports whether a parent has a member at p, which must not be
// below the path of the previous call.
func (w *pathWalk) has(p string) bool {
	found := false
	for k, t := range w.tables {
		for w.at[k] < t.Len() && t.Path(w.at[k]) < p {
			w.at[k]++
		}
		found = found || w.at[k] < t.Len() && t.Path(w.at[k]) == p
	}
	return found
}
