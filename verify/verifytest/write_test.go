package verifytest

import (
	"bytes"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

// WriteTable streams the very table and manifest Table returns: the bench
// measures the table of the issue, so a drift would measure another one.
func TestWriteTableIsTable(t *testing.T) {
	t.Parallel()
	for _, k := range []Kind{S3, CAS} {
		for _, n := range []int{0, 1, 2500} {
			d, manifest, table := Table(n, k, 7)
			var buf bytes.Buffer
			gd, gt, gm, err := WriteTable(&buf, n, k, 7)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), table) {
				t.Errorf("kind %d, %d members: WriteTable wrote %d bytes that differ from Table's %d", k, n, buf.Len(), len(table))
			}
			if gd != d || gt != verify.SHA256(table) || !bytes.Equal(gm, manifest) {
				t.Errorf("kind %d, %d members: digests %s, %s and manifest %s; want %s, %s and %s", k, n, gd, gt, gm, d, verify.SHA256(table), manifest)
			}
		}
	}
}
