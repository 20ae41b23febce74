// Package gate keeps one linear, hash-chained history per alias: the gate
// that says which snapshot an alias points at and where its tombstone
// watermark and benchmark fence stand.
//
// # Keys
//
// A gate NAME lives under gates/NAME/ in a store:
//
//   - gates/NAME/head: the current Record, canonical JSON (verify/jcs). It
//     is the only key pinfs ever overwrites, and only with one conditional
//     write (store.Swapper).
//   - gates/NAME/records/sha256/<hex>: every record ever committed, under
//     the SHA-256 of its bytes, stored there only once the head held it.
//
// Revocation and benchmark lists are content addressed at
// lists/sha256/<hex> (PutList, GetList) and named from records by digest.
//
// # Commits
//
// Update reads the head, lets its caller build the next record, swaps the
// head from the revision it read to the new record (S3: PutObject with
// If-Match on the ETag read, or If-None-Match: * to create the gate; a
// local store: an exclusive lock and an atomic rename), and only then
// stores the record under records/. Of any number of concurrent commits
// prepared at one generation, exactly one wins; the others lose with an
// error wrapping store.ErrConflict, or, when their caller asked for it,
// read the new head and try again. A lost commit leaves nothing behind.
// A commit that stopped between its two writes leaves a head whose record
// is missing from records/; the next reader of the head stores it (the
// head's bytes are the record).
//
// # History
//
// Each record names its predecessor by digest (Prev) and has the next
// generation, so Log can walk from the head to generation 1 and check each
// link: a missing record (a gap), a record whose bytes do not hash to its
// name (tampering), or a generation that does not step down by exactly one
// (a fork) stops it with an error. Update and Log both refuse a successor
// that moves a fence back, drops a revocation or benchmark list, or clears
// the active digest.
//
// Since a record enters records/ only after it was the head, the head must
// also be the newest record there: Head, Log and Update list records/
// before they read the head and refuse a head when records/ holds a
// record of a greater generation (the head was set back to an older
// record, which would drop the fences after it), and a missing head when
// records/ holds any (the head was deleted).
//
// # What the history proves
//
// Records are not signed. The chain proves that the head descends, one
// valid commit at a time, from generation 1, and (records/ being complete)
// that it is the newest commit: fences only move forward along it, and a
// head set back, deleted or forked is refused. It does not prove who made
// a commit: a store writer can commit a record of their own on top (with
// a trust policy of their own kept in it), and one who can also delete can
// remove records and write a new history. Only a trust policy the reader
// brings (--policy) checks approvals against such a writer.
package gate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/user"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

// ErrNoGate is wrapped by Head and Log when the alias has no gate yet.
var ErrNoGate = errors.New("no such gate")

const (
	// maxAttempts bounds the commits Update tries when told to retry.
	maxAttempts = 50
	// firstPause and maxPause bound the jittered pause between two tries.
	firstPause = 2 * time.Millisecond
	maxPause   = 200 * time.Millisecond
)

// Store is a store in which gates can be kept: blobs, a conditional
// replace of one key, and a listing (to see whether a gate without a head
// has history).
type Store interface {
	store.Blobs
	store.Swapper
	store.KeyLister
}

// Gate is the gate of one alias in one store. It holds no state of its own
// (what it learns of a history is kept per process, see chain), so it is
// safe for concurrent use, and so are gates of the same name opened in
// other processes: they agree through the store.
type Gate struct {
	st   Store
	name string
}

// HeadKey is the store key of gate name's current record.
func HeadKey(name string) string { return "gates/" + name + "/head" }

// RecordKey is the store key of the record of gate name with digest d.
func RecordKey(name string, d verify.Digest) string {
	return "gates/" + name + "/records/sha256/" + d.Hex()
}

// Open returns the gate name in st. It refuses a bad name, a store that
// cannot replace a key conditionally (an error wrapping
// store.ErrNotExclusive): without that, two commits could both win; and
// one that cannot list keys.
func Open(st store.Blobs, name string) (*Gate, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if _, ok := st.(store.Swapper); !ok {
		return nil, fmt.Errorf("gate %s: the store %v cannot do conditional writes (compare-and-swap), which the gate needs: %w",
			name, describe(st), store.ErrNotExclusive)
	}
	s, ok := st.(Store)
	if !ok {
		return nil, fmt.Errorf("gate %s: the store %v cannot list keys, which the gate needs to check its history", name, describe(st))
	}
	return &Gate{st: s, name: name}, nil
}

func describe(st store.Blobs) string {
	if s, ok := st.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", st)
}

// Name returns the gate's name.
func (g *Gate) Name() string { return g.name }

// Head returns the current record, once it checks out (see current): a
// head is only trusted as the newest link of a chain that reaches
// generation 1, with no newer record under records/. A record's chain is
// checked once per process (see chain); records/ is listed once per call.
// It fails with an error wrapping ErrNoGate if the gate does not exist,
// and refuses a head that is not a well-formed record of this gate in
// canonical JSON, whose chain is broken, that was rolled back to an older
// record, or that was deleted while records/ holds history.
func (g *Gate) Head(ctx context.Context) (*Record, error) {
	s, err := g.current(ctx, false, false)
	if err != nil {
		return nil, err
	}
	return s.head, nil
}

// load reads the head and returns it with the digest of its bytes and the
// store's revision of them. It does not check the head's history (chain
// does).
func (g *Gate) load(ctx context.Context) (*Record, verify.Digest, string, error) {
	data, rev, err := g.st.Load(ctx, HeadKey(g.name))
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", "", fmt.Errorf("gate %s: %w (no %s in the store)", g.name, ErrNoGate, HeadKey(g.name))
	}
	if err != nil {
		return nil, "", "", fmt.Errorf("gate %s: %w", g.name, err)
	}
	r, err := parseRecord(g.name, data)
	if err != nil {
		return nil, "", "", fmt.Errorf("gate %s: head: %w", g.name, err)
	}
	return r, verify.SHA256(data), rev, nil
}

// Update commits one change with one conditional write of the head. fn
// gets a copy of the current record (nil if the gate does not exist yet)
// and returns the content of the next one; Update fills in Schema, Name,
// Generation (the current one + 1, or 1), Prev and Time, and By (user@host)
// unless fn set it. An error from fn aborts the change, writes nothing and
// is returned as it is. The next record must be a valid successor (see the
// package documentation); once the head holds it, it is stored under
// records/ too (a failure to store it is no error: the commit is made, and
// the next reader of the head stores it).
//
// The current head must check out (see current; its own record is stored
// under records/ first if missing); a gate without a head whose records/
// hold records is not created again. If another commit wins first, Update
// without retry fails with an error wrapping store.ErrConflict that says
// where the gate moved; with retry it reads the head again and calls fn
// again, after a jittered pause, up to 50 times. A store that cannot make
// the write conditional fails with an error wrapping store.ErrNotExclusive;
// there is never an unconditional write.
func (g *Gate) Update(ctx context.Context, retry bool, fn func(cur *Record) (*Record, error)) (*Record, error) {
	for attempt := 1; ; attempt++ {
		s, err := g.current(ctx, false, true)
		switch {
		case errors.Is(err, errHeadDeleted):
			return nil, fmt.Errorf("%w: refusing to create the gate again at generation 1 (restore the head from the newest record in %s, or delete them if the gate never had a head)",
				err, recordsPrefix(g.name))
		case errors.Is(err, ErrNoGate): // a new gate
		case err != nil:
			return nil, err
		}
		cur, curDigest, rev := s.head, s.digest, s.rev
		var arg *Record
		if cur != nil {
			arg = cur.clone()
		}
		next, err := fn(arg)
		if err != nil {
			return nil, err
		}
		if next == nil {
			return nil, fmt.Errorf("gate %s: the change returned no record", g.name)
		}
		next = next.clone()
		data, err := g.seal(cur, curDigest, next)
		if err != nil {
			return nil, err
		}
		err = g.st.Swap(ctx, HeadKey(g.name), data, rev)
		switch {
		case err == nil:
			_ = g.st.Put(ctx, RecordKey(g.name, verify.SHA256(data)), data) // see above
			return next, nil
		case !errors.Is(err, store.ErrConflict):
			return nil, fmt.Errorf("gate %s: %w", g.name, err)
		case !retry:
			return nil, g.moved(ctx, generation(cur), err)
		case attempt == maxAttempts:
			return nil, fmt.Errorf("gate %s: gave up after %d commits lost to concurrent ones: %w", g.name, attempt, err)
		}
		if err := pause(ctx, attempt); err != nil {
			return nil, fmt.Errorf("gate %s: %w", g.name, err)
		}
	}
}

// seal fills in the fields Update sets, checks that next may follow cur
// (nil: none) and returns next's canonical JSON.
func (g *Gate) seal(cur *Record, curDigest verify.Digest, next *Record) ([]byte, error) {
	next.Schema, next.Name = Schema, g.name
	next.Generation, next.Prev = 1, ""
	if cur != nil {
		next.Generation, next.Prev = cur.Generation+1, curDigest
	}
	next.Time = time.Now().UTC().Format(time.RFC3339Nano)
	if next.By == "" {
		next.By = whoami()
	}
	if err := next.check(g.name); err != nil {
		return nil, fmt.Errorf("gate %s: bad change: %w", g.name, err)
	}
	if cur != nil {
		if err := checkSuccessor(cur, curDigest, next); err != nil {
			return nil, fmt.Errorf("gate %s: bad change: %w", g.name, err)
		}
	}
	data, err := next.encode()
	if err != nil {
		return nil, fmt.Errorf("gate %s: encode: %w", g.name, err)
	}
	return data, nil
}

// moved returns the error of a commit prepared at generation prepared that
// lost, naming the generation the gate is at now when it can be read.
func (g *Gate) moved(ctx context.Context, prepared int64, lost error) error {
	if now, err := g.Head(ctx); err == nil {
		if err := g.Expect(now, prepared); err != nil {
			return err
		}
	}
	return fmt.Errorf("gate %s moved while this change was prepared at generation %d: %w", g.name, prepared, lost)
}

// Expect returns nil if cur (nil: no gate yet) is at generation n (0: no
// gate yet), and otherwise an error wrapping store.ErrConflict that says
// where the gate is. A change that must not apply over a gate that moved
// since it was read (an activation with an expected generation) calls it
// from its Update fn.
func (g *Gate) Expect(cur *Record, n int64) error {
	if got := generation(cur); got != n {
		return fmt.Errorf("gate %s moved to generation %d while this change was prepared at generation %d: %w",
			g.name, got, n, store.ErrConflict)
	}
	return nil
}

func generation(r *Record) int64 {
	if r == nil {
		return 0
	}
	return r.Generation
}

// pause waits before try attempt+1: a random time up to an exponentially
// growing bound (full jitter), so that writers that lost together do not
// collide again.
func pause(ctx context.Context, attempt int) error {
	bound := min(maxPause, firstPause<<min(attempt, 16))
	t := time.NewTimer(rand.N(bound) + time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// whoami returns user@host for a record's By.
func whoami() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if name == "" {
		name = fmt.Sprintf("uid%d", os.Getuid())
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return name + "@" + host
}
