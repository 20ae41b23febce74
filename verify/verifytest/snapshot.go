package verifytest

import "github.com/pinfs/pinfs/verify"

// Snapshot builds the checked snapshot of members ms in memory: their
// member table, a manifest with purpose and nothing else that refers to
// it, both checked as a mount checks what it loads.
func Snapshot(ms []verify.Member, purpose string) (*verify.Snapshot, error) {
	table, err := verify.EncodeMembers(ms)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, m := range ms {
		total += m.Size
	}
	man := &verify.Manifest{Purpose: purpose,
		Members: verify.MembersRef{URI: verify.MembersURI(verify.SHA256(table)), Count: int64(len(ms)), Bytes: total}}
	mb, err := verify.Build(man)
	if err != nil {
		return nil, err
	}
	c, err := verify.Check(man.SnapshotID, mb, table)
	if err != nil {
		return nil, err
	}
	return c.Snapshot()
}
