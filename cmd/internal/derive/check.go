package derive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/derivations"
	"github.com/pinfs/pinfs/verify"
	record "github.com/pinfs/pinfs/verify/derive"
)

// Lookup returns the records `pinfs derive --check TARGET` checks. A full
// digest is looked up as a derivation key first, then as an output digest
// (every record of that output; none is derivations.ErrNoRecord); anything else is the path of a record
// file, which must Parse. A target that starts with "sha256:" but is
// neither a full digest nor a file is refused with an error wrapping
// verify.ErrNotDigest.
func Lookup(ctx context.Context, st store.Store, target string) ([]*record.Record, error) {
	d, derr := verify.ParseDigest(target)
	if derr != nil {
		return readRecordFile(target, derr)
	}
	return derivations.Find(ctx, st, d)
}

// readRecordFile reads and parses the record file path. derr is why path
// is not a digest, returned when path is missing and looks like one.
func readRecordFile(path string, derr error) ([]*record.Record, error) {
	b, err := os.ReadFile(path)
	b = bytes.TrimSuffix(b, []byte("\n")) // as --record writes it
	if errors.Is(err, os.ErrNotExist) && len(path) >= 7 && path[:7] == "sha256:" {
		return nil, derr
	}
	if err != nil {
		return nil, fmt.Errorf("record file: %w", err)
	}
	r, err := record.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("record file %s: %w", path, err)
	}
	return []*record.Record{r}, nil
}
