package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/pinfs/pinfs/store"
)

// Opener is a Getter that can also stream a blob: Open returns a reader
// of the blob at key, which the caller closes, and its size in bytes (-1
// when unknown). Fetch and Load stream member tables through it.
type Opener interface {
	Open(ctx context.Context, key string) (io.ReadCloser, int64, error)
}

// CheckReader is Check for a member table read from r: size is its length
// in bytes, or -1 when unknown. The table is hashed as it is read and
// parsed in chunks straight into the compact Table, so its bytes are
// never held whole; the result is returned only once the whole table
// matched the manifest's digest, and nothing parsed from a table that
// did not is used.
func CheckReader(d Digest, manifest []byte, r io.Reader, size int64) (*Checked, error) {
	m, err := ParseManifest(d, manifest)
	if err != nil {
		return nil, err
	}
	return checkTableFrom(m, r, &memSink{})
}

// tableDigestError is the error of a streamed member table whose bytes
// do not hash to the digest the manifest names.
type tableDigestError struct{ err error }

func (e *tableDigestError) Error() string { return e.err.Error() }
func (e *tableDigestError) Unwrap() error { return e.err }

// checkTableFrom checks the table that r yields against the parsed
// manifest m, building the Table into s. The digest is checked first: a
// table that does not match it is reported as such, whatever else is
// wrong with it.
func checkTableFrom(m *Manifest, r io.Reader, s sink) (*Checked, error) {
	d := m.SnapshotID
	td, _ := m.Members.Digest() // checked by ParseManifest
	h := sha256.New()
	hd := &header{table: td}
	t, problems, err := parseTableFrom(r, h, s, hd)
	var re *readError
	if errors.As(err, &re) {
		return nil, fmt.Errorf("member table %s of %s: %w", td, d, re.err)
	}
	if got := Digest("sha256:" + hex.EncodeToString(h.Sum(nil))); got != td {
		return nil, &tableDigestError{fmt.Errorf("member table of %s: content hashes to %s, manifest names %s: %w", d, got, td, ErrInvalid)}
	}
	if err != nil {
		return nil, fmt.Errorf("member table of %s: %v: %w", d, err, ErrInvalid)
	}
	return checkParsed(m, t, hd, problems)
}

// readError is an error of the reader a table is parsed from.
type readError struct{ err error }

func (e *readError) Error() string { return "read: " + e.err.Error() }

// openTable streams the member table of m from o and checks it, indexing
// it into ix's directory when there is one. A table larger than the
// manifest's count allows (store.TableLimit) is refused: before it is
// read when its size says so, else once that much has come.
func openTable(ctx context.Context, o Opener, m *Manifest, ix *indexer) (*Checked, error) {
	td, _ := m.Members.Digest()
	key := MembersKey(td)
	open := o.Open
	if nc, ok := o.(NoCopyOpener); ok && ix != nil {
		open = nc.OpenNoCopy
	}
	rc, size, err := open(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("member table %s of %s: %w", td, m.SnapshotID, err)
	}
	defer rc.Close()
	limit := store.TableLimit(m.Members.Count)
	if size > limit {
		return nil, tableTooLarge(m, key)
	}
	s := ix.sink(td, size, m.Members.Count)
	c, err := checkTableFrom(m, store.LimitReader(rc, limit, key), s)
	if errors.Is(err, store.ErrTooLarge) {
		err = tableTooLarge(m, key)
	}
	ix.done(s, c, err)
	return c, err
}

// tableTooLarge is the error for m's member table, at key, holding more
// than store.TableLimit allows for the count of members m says.
func tableTooLarge(m *Manifest, key string) error {
	return fmt.Errorf("member table of %s: %w (for the %d members the manifest counts)",
		m.SnapshotID, store.TooLarge(key, store.TableLimit(m.Members.Count)), m.Members.Count)
}
