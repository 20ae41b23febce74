package verify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime/debug"
	"strings"

	"github.com/pinfs/pinfs/store"
)

// Checked is the result of checking a manifest and its member table:
// both matched their digests and parsed, and Problems lists the member
// checks that failed (none for a snapshot that can be served).
type Checked struct {
	Manifest *Manifest
	Table    *Table
	Problems []Problem
}

// Check verifies manifest bytes against digest d and table bytes against
// the manifest's members.uri and count, then checks every member. An
// error means the manifest or table itself cannot be trusted.
func Check(d Digest, manifest, table []byte) (*Checked, error) {
	m, err := ParseManifest(d, manifest)
	if err != nil {
		return nil, err
	}
	return checkTable(m, table)
}

// checkTable checks table against the parsed manifest m.
func checkTable(m *Manifest, table []byte) (*Checked, error) {
	d := m.SnapshotID
	td, _ := m.Members.Digest() // checked by ParseManifest
	if got := SHA256(table); got != td {
		return nil, fmt.Errorf("member table of %s: content hashes to %s, manifest names %s: %w", d, got, td, ErrInvalid)
	}
	h := &header{table: td}
	t, problems, err := parseTable(table, newMemSink(min(max(m.Members.Count, 0), int64(len(table))/minLine+1), int64(len(table))), h)
	if err != nil {
		return nil, fmt.Errorf("member table of %s: %v: %w", d, err, ErrInvalid)
	}
	return checkParsed(m, t, h, problems)
}

// checkParsed checks the parsed table t of the manifest m, whose counts
// are in h: its count and total size; problems are its members'.
func checkParsed(m *Manifest, t *Table, h *header, problems []Problem) (*Checked, error) {
	d := m.SnapshotID
	if int64(t.Len()) != m.Members.Count {
		return nil, fmt.Errorf("member table of %s: %d members, manifest says %d: %w", d, t.Len(), m.Members.Count, ErrInvalid)
	}
	if h.bytes != m.Members.Bytes {
		return nil, fmt.Errorf("member table of %s: %d bytes, manifest says %d: %w", d, h.bytes, m.Members.Bytes, ErrInvalid)
	}
	return &Checked{Manifest: m, Table: t, Problems: problems}, nil
}

// Snapshot is a manifest and member table that passed every check. It can
// only be obtained from (*Checked).Snapshot or Load, so code that receives
// a *Snapshot never sees an unverified manifest. A Snapshot is immutable
// and safe for concurrent use.
type Snapshot struct {
	manifest *Manifest
	table    *Table
}

// Snapshot returns the verified snapshot, or an error naming the first
// problems when any member check failed.
func (c *Checked) Snapshot() (*Snapshot, error) {
	if n := len(c.Problems); n > 0 {
		var first []string
		for _, p := range c.Problems[:min(n, 3)] {
			first = append(first, p.String())
		}
		return nil, fmt.Errorf("manifest %s: %d member problems: %s: %w", c.Manifest.SnapshotID, n, strings.Join(first, "; "), ErrInvalid)
	}
	return &Snapshot{manifest: c.Manifest, table: c.Table}, nil
}

// Digest returns the snapshot's manifest digest.
func (s *Snapshot) Digest() Digest { return s.manifest.SnapshotID }

// Manifest returns the verified manifest. Callers must not modify it.
func (s *Snapshot) Manifest() *Manifest { return s.manifest }

// Table returns the verified members sorted by path, in compact form.
func (s *Snapshot) Table() *Table { return s.table }

// Members returns the verified members sorted by path as a new slice.
// It costs a few hundred bytes per member; code that serves or walks
// large snapshots uses Table.
func (s *Snapshot) Members() []Member { return s.table.Members() }

// Getter reads metadata blobs by store key (store.Blobs satisfies it).
// The error of a key it does not hold matches fs.ErrNotExist, as the
// stores' do; a Getter that is a fmt.Stringer names its store in Fetch's
// error for a missing manifest.
type Getter interface {
	Get(ctx context.Context, key string) ([]byte, error)
}

// Fetch reads the manifest with digest d and its member table from g and
// checks them. When g is also an Opener, the table is streamed
// (CheckReader) rather than read whole. When g is an Indexer, a table
// whose index g keeps is mapped from it instead, and a table that has
// none is indexed as it is read (see Indexer).
func Fetch(ctx context.Context, g Getter, d Digest) (*Checked, error) {
	m, err := FetchManifest(ctx, g, d)
	if err != nil {
		return nil, err
	}
	ix := indexerOf(g)
	if c, err := ix.open(g, m); c != nil || err != nil {
		return c, err
	}
	if o, ok := g.(Opener); ok {
		c, err := openTable(ctx, o, m, ix)
		var mismatch *tableDigestError
		if !errors.As(err, &mismatch) {
			return c, err
		}
		// A copy that does not match its key (a corrupt local copy in a
		// cache): Get checks the copy it returns, and falls back to the
		// store.
	}
	c, n, err := getTable(ctx, g, m)
	if err == nil && n >= bigTable {
		// The bytes of a large table are garbage now, but the runtime
		// would keep them resident for a long time.
		debug.FreeOSMemory()
	}
	return c, err
}

// FetchManifest reads the manifest with digest d from g (at most
// store.MaxManifest bytes) and checks it against d, without its member
// table. A manifest g does not hold is the one-line error that names the
// store and pinfs list (noManifestError).
func FetchManifest(ctx context.Context, g Getter, d Digest) (*Manifest, error) {
	mb, err := store.GetAtMost(ctx, g, ManifestKey(d), store.MaxManifest)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &noManifestError{d: d, store: storeURL(g), err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", d, err)
	}
	return ParseManifest(d, mb)
}

// noManifestError is Fetch's error for a manifest the store does not hold
// (a wrong digest, store or prefix): one line that names the digest and
// the store and, for a store with a URL, the command that lists the
// digests it does hold (a user who lost a pin's output has no other way
// back to them). It wraps the store's error, whose full text Detail
// returns.
type noManifestError struct {
	d     Digest
	store string // the store URL, or "" for a Getter that names none
	err   error
}

func (e *noManifestError) Error() string {
	if e.store == "" {
		return "no manifest " + string(e.d) + " in the store"
	}
	return "no manifest " + string(e.d) + " in store " + e.store + "; pinfs list --store " + e.store + " lists the manifests it holds"
}

func (e *noManifestError) Unwrap() error { return e.err }

// Detail returns the store's error with its own detail (store.Detail).
func (e *noManifestError) Detail() string {
	s := e.err.Error()
	var d interface{ Detail() string }
	if errors.As(e.err, &d) && d.Detail() != "" {
		s += ": " + d.Detail()
	}
	return s
}

// storeURL is the URL of the store g reads, or "" when g names none.
func storeURL(g Getter) string {
	if s, ok := g.(fmt.Stringer); ok {
		return s.String()
	}
	return ""
}

// getTable reads the member table of m from g whole and checks it; it
// also returns the table's size.
func getTable(ctx context.Context, g Getter, m *Manifest) (*Checked, int, error) {
	td, _ := m.Members.Digest()
	tb, err := store.GetAtMost(ctx, g, MembersKey(td), store.TableLimit(m.Members.Count))
	if errors.Is(err, store.ErrTooLarge) {
		return nil, 0, tableTooLarge(m, MembersKey(td))
	}
	if err != nil {
		return nil, 0, fmt.Errorf("member table %s of %s: %w", td, m.SnapshotID, err)
	}
	c, err := checkTable(m, tb)
	return c, len(tb), err
}

// bigTable is the size of a member table read whole from which Fetch
// returns the table's memory to the operating system once it is parsed.
const bigTable = 32 << 20

// Load is Fetch followed by Snapshot: the only way for a mount to obtain
// a snapshot from a store.
//
// A mount holds the snapshot for its whole life, so what it costs to
// load is RSS: a Getter that is also an Opener (the metadata cache, the
// stores) streams the table, which keeps a few MiB of its bytes at a time
// instead of all of them (~280 MB for 1M members).
func Load(ctx context.Context, g Getter, d Digest) (*Snapshot, error) {
	c, err := Fetch(ctx, g, d)
	if err != nil {
		return nil, err
	}
	s, err := c.Snapshot()
	if err != nil {
		c.Table.Close() // no one else has it
	}
	return s, err
}

// Close unmaps the snapshot's table (Table.Close): only its owner calls
// it, once no one reads the snapshot. A mount, which holds its snapshot
// for its whole life, never does.
func (s *Snapshot) Close() error { return s.table.Close() }
