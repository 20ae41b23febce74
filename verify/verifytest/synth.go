// Package verifytest builds synthetic snapshots for tests and benchmarks
// of the code that loads, checks and serves large member tables.
package verifytest

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"

	"github.com/pinfs/pinfs/verify"
)

// Kind selects the source of synthetic members.
type Kind int

const (
	// S3 members: bucket "ml-datasets", key "imagenet/v3/<path>", a
	// 26-character version id and a quoted MD5 ETag.
	S3 Kind = iota
	// CAS members: cas equals digest.
	CAS
)

// Dirs is the number of directories a synthetic table spreads its
// members over: train/shard-NNNN (90 %) and val/shard-NNNN (10 %).
const Dirs = 1000

// Path returns the path of member i of a table of n members, in byte
// order: train/shard-0042/sample-000123.jpg.
func Path(i, n int) string {
	per := max((n+Dirs-1)/Dirs, 1)
	d, k := i/per, i%per
	split, shard := "train", d
	if d >= Dirs*9/10 {
		split, shard = "val", d-Dirs*9/10
	}
	return fmt.Sprintf("%s/shard-%04d/sample-%06d.jpg", split, shard, k)
}

// Members returns n members of kind k sorted by path, with pseudo-random
// digests, sizes, version ids and ETags drawn from seed.
func Members(n int, k Kind, seed uint64) []verify.Member {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	ms := make([]verify.Member, n)
	for i := range ms {
		ms[i] = member(rng, i, n, k)
	}
	return ms
}

const versionChars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz._"

func member(rng *rand.Rand, i, n int, k Kind) verify.Member {
	var sum [32]byte
	for j := range sum {
		sum[j] = byte(rng.Uint32())
	}
	p := Path(i, n)
	split := p[:len(p)-len("/shard-0000/sample-000000.jpg")]
	m := verify.Member{ID: p, Path: p, Split: split, Size: 50_000 + rng.Int64N(450_000), Digest: "blake3:" + hex.EncodeToString(sum[:])}
	if k == CAS {
		m.CAS = m.Digest
		return m
	}
	var v [26]byte
	for j := range v {
		v[j] = versionChars[rng.IntN(len(versionChars))]
	}
	var md5 [16]byte
	for j := range md5 {
		md5[j] = byte(rng.Uint32())
	}
	m.S3 = &verify.S3Source{Bucket: "ml-datasets", Key: "imagenet/v3/" + p, VersionID: string(v[:]), ETag: `"` + hex.EncodeToString(md5[:]) + `"`}
	return m
}

// Table returns the member table of n members of kind k and a manifest
// that names it, with the manifest's digest. Members are generated one
// at a time, so a table of millions of members costs only its bytes.
func Table(n int, k Kind, seed uint64) (d verify.Digest, manifest, table []byte) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var total int64
	for i := range n {
		m := member(rng, i, n, k)
		table = append(m.AppendCanonical(table), '\n')
		total += m.Size
	}
	man := &verify.Manifest{
		Purpose:     "synthetic",
		SplitPolicy: "dir:test,train,val,validation",
		Members:     verify.MembersRef{URI: verify.MembersURI(verify.SHA256(table)), Count: int64(n), Bytes: total},
	}
	manifest, err := verify.Build(man)
	if err != nil {
		panic(fmt.Sprintf("verifytest: %v", err))
	}
	return man.SnapshotID, manifest, table
}
