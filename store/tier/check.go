package tier

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// Check reports whether data is the metadata blob of kind named by hx
// (see Meta): a manifest by its canonical digest (verify.ParseManifest),
// a member table by the SHA-256 of its bytes, an outboard by its BLAKE3
// tree (b3.CheckOutboard, its size from its header).
// Any failure wraps b3.ErrMismatch.
func Check(kind, hx string, data []byte) error {
	switch kind {
	case "manifests/sha256":
		if _, err := verify.ParseManifest(verify.Digest("sha256:"+hx), data); err != nil {
			return fmt.Errorf("%s/%s: %w: %w", kind, hx, err, b3.ErrMismatch)
		}
		return nil
	case "members/sha256":
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hx {
			return fmt.Errorf("%s/%s: the bytes hash to sha256:%x: %w", kind, hx, sum, b3.ErrMismatch)
		}
		return nil
	}
	d, err := b3.Parse(b3.Prefix + hx)
	if err != nil {
		return fmt.Errorf("%s/%s: %w: %w", kind, hx, err, b3.ErrMismatch)
	}
	if len(data) < 8 {
		return fmt.Errorf("%s/%s: %d bytes, shorter than an outboard's header: %w", kind, hx, len(data), b3.ErrMismatch)
	}
	size := binary.LittleEndian.Uint64(data)
	if size > 1<<62 {
		return fmt.Errorf("%s/%s: header says %d bytes: %w", kind, hx, size, b3.ErrMismatch)
	}
	if err := b3.CheckOutboard(d, int64(size), data); err != nil {
		if errors.Is(err, b3.ErrMismatch) {
			return fmt.Errorf("%s/%s: %w", kind, hx, err)
		}
		return fmt.Errorf("%s/%s: %w: %w", kind, hx, err, b3.ErrMismatch)
	}
	return nil
}
