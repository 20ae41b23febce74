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

// ErrNoRecord is wrapped by Lookup's error for a digest that is neither a
// key nor an output with a record.
var ErrNoRecord = errors.New("no derivation record")

// Lookup returns the records `pinfs derive --check TARGET` checks. A full
// digest is looked up as a derivation key first, then as an output digest
// (every record of that output); anything else is the path of a record
// file, which must Parse. A target that starts with "sha256:" but is
// neither a full digest nor a file is refused with an error wrapping
// verify.ErrNotDigest.
func Lookup(ctx context.Context, st store.Store, target string) ([]*record.Record, error) {
	d, derr := verify.ParseDigest(target)
	if derr != nil {
		return readRecordFile(target, derr)
	}
	r, err := derivations.ByKey(ctx, st, d)
	if err == nil {
		return []*record.Record{r}, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	rs, err := derivations.ByOutput(ctx, st, d)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%w for %s in store %s", ErrNoRecord, d, st)
	}
	return rs, nil
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
