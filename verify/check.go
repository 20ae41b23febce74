package verify

import (
	"fmt"
	"strings"

	"github.com/pinfs/pinfs/verify/b3"
)

// Problem kinds reported by CheckMembers and by the store checks of
// `pinfs verify`. They are stable strings: scripts and run records match
// on them.
const (
	KindDuplicateID  = "duplicate_id"
	KindUnsafePath   = "unsafe_path"
	KindUnversioned  = "unversioned"
	KindBadMember    = "bad_member"
	KindMissing      = "version_missing"
	KindSizeMismatch = "size_mismatch"
	KindMismatch     = "mismatch"
	KindReadFailed   = "read_failed"
)

// Problem is one failed check of one member.
type Problem struct {
	Kind   string `json:"kind"`
	Path   string `json:"path"`
	ID     string `json:"id,omitempty"`
	Detail string `json:"detail"`
}

func (p Problem) String() string {
	return fmt.Sprintf("%s: %s (id %s): %s", p.Kind, p.Path, p.ID, p.Detail)
}

// CheckMembers checks the structure of a member table that ParseMembers
// accepted: unique ids (so one split per id), safe and unique paths, no
// path that is both a file and a directory, well-formed digests and sizes,
// exactly one source per member, and a real version id for every S3
// member. It returns every problem found, in table order.
func CheckMembers(ms []Member) []Problem {
	var ps []Problem
	add := func(kind string, m *Member, format string, a ...any) {
		ps = append(ps, Problem{Kind: kind, Path: m.Path, ID: m.ID, Detail: fmt.Sprintf(format, a...)})
	}
	ids := make(map[string]string, len(ms)) // id -> split of first holder
	files := make(map[string]bool, len(ms))
	for i := range ms {
		files[ms[i].Path] = true
	}
	seen := make(map[string]bool, len(ms))
	for i := range ms {
		m := &ms[i]
		if err := CheckPath(m.Path); err != nil {
			add(KindUnsafePath, m, "%v", err)
		} else if seen[m.Path] {
			add(KindUnsafePath, m, "path used by an earlier member")
		} else {
			for j := strings.IndexByte(m.Path, '/'); j >= 0; j = next(m.Path, j) {
				if files[m.Path[:j]] {
					add(KindUnsafePath, m, "parent %q is also a file", m.Path[:j])
					break
				}
			}
		}
		seen[m.Path] = true
		if m.ID == "" {
			add(KindBadMember, m, "empty id")
		} else if split, dup := ids[m.ID]; dup {
			add(KindDuplicateID, m, "id %q already used (split %q, this one %q)", m.ID, split, m.Split)
		} else {
			ids[m.ID] = m.Split
		}
		if _, err := b3.Parse(m.Digest); err != nil {
			add(KindBadMember, m, "%v", err)
		}
		switch {
		case m.S3 != nil && m.CAS != "":
			add(KindBadMember, m, "both an s3 and a cas source")
		case m.S3 != nil:
			if m.S3.Bucket == "" || m.S3.Key == "" {
				add(KindBadMember, m, "s3 source without bucket or key")
			}
			if v := m.S3.VersionID; v == "" || v == "null" {
				add(KindUnversioned, m, "s3://%s/%s has no real version id (%q)", m.S3.Bucket, m.S3.Key, v)
			}
		case m.CAS != "":
			if m.CAS != m.Digest {
				add(KindBadMember, m, "cas address %s differs from digest %s", m.CAS, m.Digest)
			}
		default:
			add(KindBadMember, m, "no source")
		}
	}
	return ps
}

// next returns the index of the next '/' in p after position j, or -1.
func next(p string, j int) int {
	k := strings.IndexByte(p[j+1:], '/')
	if k < 0 {
		return -1
	}
	return j + 1 + k
}
