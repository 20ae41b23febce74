package blocks

import (
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// MemberOf returns m, member i of snapshot snap's table, as the reader
// needs it. It is cheap: callers make one for each read rather than keep
// one for every member of a snapshot.
func MemberOf(snap verify.Digest, i int, m *verify.Member) (Member, error) {
	d, err := b3.Parse(m.Digest)
	if err != nil {
		return Member{}, err
	}
	obj, err := m.Object()
	if err != nil {
		return Member{}, err
	}
	return Member{Path: m.Path, ID: m.ID, Digest: d, Size: m.Size, Object: obj, Snapshot: string(snap), Index: i}, nil
}
