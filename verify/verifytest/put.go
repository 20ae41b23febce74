package verifytest

import (
	"context"

	"github.com/pinfs/pinfs/verify"
)

// Putter is where PutSnapshot writes: any store's Put.
type Putter interface {
	Put(ctx context.Context, key string, data []byte) error
}

// PutSnapshot writes the member table of ms and a manifest that names it
// into st. man supplies the manifest's other fields (sources, split
// policy, purpose); its member reference is filled in. It returns the
// manifest digest, the members' total size and the table's length.
func PutSnapshot(ctx context.Context, st Putter, ms []verify.Member, man verify.Manifest) (verify.Digest, int64, int, error) {
	table, err := verify.EncodeMembers(ms)
	if err != nil {
		return "", 0, 0, err
	}
	var total int64
	for i := range ms {
		total += ms[i].Size
	}
	td := verify.SHA256(table)
	if err := st.Put(ctx, verify.MembersKey(td), table); err != nil {
		return "", 0, 0, err
	}
	man.Members = verify.MembersRef{URI: verify.MembersURI(td), Count: int64(len(ms)), Bytes: total}
	doc, err := verify.Build(&man)
	if err != nil {
		return "", 0, 0, err
	}
	if err := st.Put(ctx, verify.ManifestKey(man.SnapshotID), doc); err != nil {
		return "", 0, 0, err
	}
	return man.SnapshotID, total, len(table), nil
}
