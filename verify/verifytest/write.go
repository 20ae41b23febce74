package verifytest

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/pinfs/pinfs/verify"
)

// WriteTable writes to w the member table that Table(n, k, seed)
// returns, one member at a time, and returns the manifest that names it
// with the manifest's digest and the table's. A table of ten million members (3.5 GB)
// then costs a buffer of memory, not its bytes: Table would hold them,
// and its doubling append briefly twice over.
func WriteTable(w io.Writer, n int, k Kind, seed uint64) (d, table verify.Digest, manifest []byte, err error) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 1<<20)
	var total int64
	var line []byte
	for i := range n {
		m := member(rng, i, n, k)
		line = append(m.AppendCanonical(line[:0]), '\n')
		if _, err := bw.Write(line); err != nil {
			return "", "", nil, err
		}
		total += m.Size
	}
	if err := bw.Flush(); err != nil {
		return "", "", nil, err
	}
	td := verify.Digest("sha256:" + hex.EncodeToString(h.Sum(nil)))
	man := &verify.Manifest{
		Purpose:     "synthetic",
		SplitPolicy: "dir:test,train,val,validation",
		Members:     verify.MembersRef{URI: verify.MembersURI(td), Count: int64(n), Bytes: total},
	}
	manifest, err = verify.Build(man)
	if err != nil {
		return "", "", nil, fmt.Errorf("verifytest: %w", err)
	}
	return man.SnapshotID, td, manifest, nil
}
