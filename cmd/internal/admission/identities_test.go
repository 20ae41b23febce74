package admission

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// refIdentity is a member's identity as the reference keys it: its S3
// object and version (ETag aside), CAS blob, size and digest. It is
// written out here rather than taken from identityOf, which the reference
// checks along with the table walk.
type refIdentity struct {
	s3          verify.S3Source
	cas, digest string
	size        int64
}

func refIdentityOf(m *verify.Member) refIdentity {
	id := refIdentity{cas: m.CAS, digest: m.Digest, size: m.Size}
	if m.S3 != nil {
		id.s3 = verify.S3Source{Bucket: m.S3.Bucket, Key: m.S3.Key, VersionID: m.S3.VersionID}
	}
	return id
}

// planHashingByMaps is planHashing as it was, with a map of every trusted
// parent member's identity (refIdentityOf) and path: the reference the
// table walk must agree with.
func planHashingByMaps(t *verify.Table, parents []*verify.Checked, deep bool, trust func(i int) error, h *Hashing) []bool {
	inherited := map[refIdentity]bool{}
	paths := map[string]bool{}
	h.Parents = []verify.Digest{}
	for i, pc := range parents {
		if pc == nil {
			continue
		}
		if err := trust(i); err != nil {
			h.Untrusted = append(h.Untrusted, UntrustedParent{pc.Manifest.SnapshotID, err.Error()})
			continue
		}
		h.Parents = append(h.Parents, pc.Manifest.SnapshotID)
		for j := range pc.Table.Len() {
			m := pc.Table.Member(j)
			inherited[refIdentityOf(&m)] = true
			paths[m.Path] = true
		}
	}
	hash := make([]bool, t.Len())
	for i := range t.Len() {
		m := t.Member(i)
		switch {
		case inherited[refIdentityOf(&m)]:
			h.Inherited++
			hash[i] = deep
		case paths[m.Path]:
			h.Changed++
			hash[i] = true
		default:
			h.New++
			hash[i] = true
		}
		if hash[i] {
			h.Hashed++
		}
	}
	return hash
}

// derived returns ms sorted by path with some members changed in each
// field of their identity, some at another path with the same identity
// (a CAS blob or S3 object that moved), some dropped and some new.
func derived(rng *rand.Rand, ms []verify.Member) []verify.Member {
	var out []verify.Member
	for _, m := range ms {
		if m.S3 != nil {
			s := *m.S3
			m.S3 = &s
		}
		switch rng.IntN(10) {
		case 0:
			continue
		case 1:
			m.Digest = verifytest.Members(1, verifytest.CAS, rng.Uint64())[0].Digest
		case 2:
			m.Size++
		case 3:
			if m.S3 != nil {
				m.S3.VersionID = "v" + m.S3.VersionID
			} else {
				m.CAS = strings.Replace(m.CAS, "blake3:", "blake3:0", 1)[:len(m.CAS)]
			}
		case 4:
			if m.S3 != nil {
				m.S3.Bucket += "-b"
			}
		case 5: // the same identity at a new path
			m.Path, m.ID = "elsewhere/"+m.Path, "elsewhere/"+m.ID
		}
		out = append(out, m)
	}
	for k := range 30 {
		m := verifytest.Members(1, verifytest.Kind(k%2), rng.Uint64())[0]
		p := fmt.Sprintf("new/ü-%d-%02d", rng.IntN(1000), k)
		m.Path, m.ID = p, p
		out = append(out, m)
	}
	slices.SortFunc(out, func(x, y verify.Member) int { return strings.Compare(x.Path, y.Path) })
	return slices.CompactFunc(out, func(x, y verify.Member) bool { return x.Path == y.Path })
}

// TestPlanHashingAsByMaps: the hashing plan over generated tables, with
// two trusted parents, an untrusted one and one that did not resolve,
// deep or not, is the one the maps gave, member by member.
func TestPlanHashingAsByMaps(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 2))
		base := verifytest.Members(600, verifytest.Kind(seed%2), seed)
		p1, p2 := derived(rng, base), derived(rng, base)
		// The child's first half comes from p1, its second from p2, so
		// that each parent holds paths the other lacks.
		half := func(ms []verify.Member, upper bool) []verify.Member {
			return slices.DeleteFunc(slices.Clone(ms), func(m verify.Member) bool { return (m.Path >= "train/shard-0300") != upper })
		}
		child := verify.NewTable(derived(rng, append(half(p1, false), half(p2, true)...)))
		checked := func(name string, ms []verify.Member) *verify.Checked {
			return &verify.Checked{Manifest: &verify.Manifest{SnapshotID: verify.SHA256([]byte(name))}, Table: verify.NewTable(ms)}
		}
		parents := []*verify.Checked{checked("p1", p1), nil, checked("untrusted", base), checked("p2", p2)}
		trust := func(i int) error {
			if i == 2 {
				return errors.New("no report")
			}
			return nil
		}
		for _, deep := range []bool{false, true} {
			var got, want Hashing
			g, err := planHashing(t.Context(), child, parents, deep, trust, &got)
			if err != nil {
				t.Fatal(err)
			}
			w := planHashingByMaps(child, parents, deep, trust, &want)
			if !reflect.DeepEqual(g, w) || !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d deep %v: plan %+v, by maps %+v", seed, deep, got, want)
			}
			if seed == 0 && !deep {
				t.Logf("%+v", countsOf(&got))
			}
		}
	}
}

// TestIdentitiesCollisionsAreCompared: with every entry's hash made the
// same, the set still answers by the members themselves: a collision
// never inherits.
func TestIdentitiesCollisionsAreCompared(t *testing.T) {
	t.Parallel()
	ms := verifytest.Members(50, verifytest.S3, 7)
	s := newIdentities()
	s.add(verify.NewTable(ms[:40]))
	s.seal()
	in, out := identityOf(&ms[5]), identityOf(&ms[45])
	collide := func(h uint64) {
		for k := range s.ents {
			s.ents[k].hash = h
		}
	}
	if collide(s.hash(in)); !s.has(in) {
		t.Error("a member among 40 of its hash is not found")
	}
	if collide(s.hash(out)); s.has(out) {
		t.Error("an identity no parent has is inherited from 40 members of its hash")
	}
}
