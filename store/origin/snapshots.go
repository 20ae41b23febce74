package origin

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/lru"
	"github.com/pinfs/pinfs/verify"
)

// snapshots are the snapshots the origin loads to check a block URL's
// hint, with what a request may cost before anything is verified:
//
//   - A snapshot no load knows is first looked up (probe): its manifest
//     is opened in the store, not read, on the request's own context and
//     place; one the store does not hold is remembered for absentFor and
//     answered 404 without a load.
//   - At most maxLoads loads run at once; a load runs on a context of its
//     own, shared by the requests that wait for it, and is canceled when
//     the last of them gives up.
//   - At most Config.Snapshots loaded snapshots are kept, least recently
//     used out. A request holds a reference to the snapshot it reads
//     (get and its release); a snapshot dropped from the cache is closed
//     (its table unmapped) when its last reference goes. The tables open
//     are at most Snapshots + maxLoads + the requests in flight.
//   - A member looked up is copied out of its table (cloneMember) and
//     kept, up to memberBytes, by snapshot and ordinal: the blocks of one
//     member are one lookup, whatever happens to its snapshot.
//
// Its methods are safe for concurrent use; mu guards the maps, the order
// and every entry's fields but done.
type snapshots struct {
	meta  verify.Getter
	store store.Store
	keep  int
	loads chan struct{} // a place per load running

	mu      sync.Mutex
	cache   map[verify.Digest]*snapEntry // loaded and kept
	order   []verify.Digest              // of cache, least recently used first
	loading map[verify.Digest]*snapEntry // being loaded
	open    int                          // snapshots loaded and not closed

	known   *lru.Cache[verify.Digest, int]       // manifests loaded once: their member count
	absent  *lru.Cache[verify.Digest, time.Time] // manifests the store did not hold, and when
	members *lru.Cache[memberKey, verify.Member] // members looked up, copied
}

// snapEntry is one load of a snapshot and, once loaded, its references.
type snapEntry struct {
	d       verify.Digest
	done    chan struct{} // closed when the load ends
	cancel  context.CancelFunc
	snap    *verify.Snapshot
	err     error
	ended   bool // the load ended: snap or err is set
	waiters int  // requests waiting for the load
	refs    int  // requests holding snap
	cached  bool // in the cache, which holds it too
}

type memberKey struct {
	snap verify.Digest
	i    int
}

// Bounds of snapshots.
const (
	// maxLoads bounds the snapshot loads running at once.
	maxLoads = 4
	// absentFor is how long a manifest the store did not hold is
	// answered 404 without asking the store again; absentMax bounds the
	// digests so remembered.
	absentFor = 10 * time.Second
	absentMax = 4096
	// knownMax bounds the manifests remembered as loaded once.
	knownMax = 4096
	// memberBytes bounds the members kept copied (a member takes a few
	// hundred bytes: some ten thousand of them).
	memberBytes = 4 << 20
	// loadTimeout bounds the load of one snapshot (ten million members
	// take seconds from an index, a minute or so from the store).
	loadTimeout = 10 * time.Minute
)

// errNoMember is the error of an ordinal past a snapshot's last member.
var errNoMember = errors.New("no such member")

func newSnapshots(cfg Config) *snapshots {
	return &snapshots{
		meta: cfg.Meta, store: cfg.Store, keep: cfg.Snapshots,
		loads:   make(chan struct{}, maxLoads),
		cache:   map[verify.Digest]*snapEntry{},
		loading: map[verify.Digest]*snapEntry{},
		known:   lru.New[verify.Digest, int](knownMax, func(int) int64 { return 1 }),
		absent:  lru.New[verify.Digest, time.Time](absentMax, func(time.Time) int64 { return 1 }),
		members: lru.New[memberKey, verify.Member](memberBytes, memberSize),
	}
}

// member returns member i of snapshot d, copied out of its table so that
// it outlives the snapshot's reference.
func (s *snapshots) member(ctx context.Context, d verify.Digest, i int) (verify.Member, error) {
	k := memberKey{d, i}
	if m, ok := s.members.Get(k); ok {
		return m, nil
	}
	if n, ok := s.known.Get(d); ok && i >= n {
		return verify.Member{}, errNoMember
	}
	snap, release, err := s.get(ctx, d)
	if err != nil {
		return verify.Member{}, err
	}
	defer release()
	t := snap.Table()
	if i >= t.Len() {
		return verify.Member{}, errNoMember
	}
	m := cloneMember(t.Member(i))
	s.members.Put(k, m)
	return m, nil
}

// get returns snapshot d, loaded and verified, and the function that
// releases it, which the caller must call once it no longer reads the
// snapshot or anything its table returned.
func (s *snapshots) get(ctx context.Context, d verify.Digest) (*verify.Snapshot, func(), error) {
	s.mu.Lock()
	snap, release, e := s.join(d)
	s.mu.Unlock()
	if snap != nil {
		return snap, release, nil
	}
	if e == nil {
		if err := s.probe(ctx, d); err != nil {
			return nil, nil, err
		}
		s.mu.Lock()
		if snap, release, e = s.join(d); e == nil && snap == nil {
			e = s.start(d)
		}
		s.mu.Unlock()
		if snap != nil {
			return snap, release, nil
		}
	}
	return s.wait(ctx, e)
}

// join returns d from the cache with a reference taken, or the load of d
// with this request counted among its waiters, or neither. s.mu is held.
func (s *snapshots) join(d verify.Digest) (*verify.Snapshot, func(), *snapEntry) {
	if e := s.cache[d]; e != nil {
		e.refs++
		s.touch(d)
		return e.snap, func() { s.release(e) }, nil
	}
	if e := s.loading[d]; e != nil {
		e.waiters++
		return nil, nil, e
	}
	return nil, nil, nil
}

// start starts the load of d, with this request its first waiter. s.mu
// is held.
func (s *snapshots) start(d verify.Digest) *snapEntry {
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	e := &snapEntry{d: d, done: make(chan struct{}), cancel: cancel, waiters: 1}
	s.loading[d] = e
	go s.load(ctx, e)
	return e
}

// wait waits for e's load, which the request of ctx joined. A request
// that gives up leaves the load to the others, and cancels it when it was
// the last.
func (s *snapshots) wait(ctx context.Context, e *snapEntry) (*verify.Snapshot, func(), error) {
	select {
	case <-e.done:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !e.ended {
		e.waiters--
		if e.waiters == 0 {
			e.cancel()
			if s.loading[e.d] == e {
				delete(s.loading, e.d)
			}
		}
		return nil, nil, ctx.Err()
	}
	if e.err != nil {
		return nil, nil, e.err
	}
	return e.snap, func() { s.release(e) }, nil // end counted the reference
}

// load loads e in one of the maxLoads places; a failure is forgotten so
// that the next request tries again.
func (s *snapshots) load(ctx context.Context, e *snapEntry) {
	var snap *verify.Snapshot
	var err error
	select {
	case s.loads <- struct{}{}:
		snap, err = verify.Load(ctx, s.meta, e.d)
		<-s.loads
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.end(e, snap, err)
}

// end records the end of e's load: the snapshot goes to the cache (unless
// another load of it got there first), with a reference for each request
// waiting.
func (s *snapshots) end(e *snapEntry, snap *verify.Snapshot, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer close(e.done)
	defer e.cancel()
	e.ended, e.snap, e.err = true, snap, err
	if s.loading[e.d] == e {
		delete(s.loading, e.d)
	}
	if err != nil {
		return
	}
	s.open++
	s.known.Put(e.d, snap.Table().Len())
	e.refs, e.waiters = e.waiters, 0
	if s.cache[e.d] == nil {
		e.cached = true
		s.cache[e.d] = e
		s.order = append(s.order, e.d)
	}
	for len(s.order) > s.keep {
		old := s.cache[s.order[0]]
		delete(s.cache, s.order[0])
		s.order = s.order[1:]
		old.cached = false
		s.closeIfUnused(old)
	}
	s.closeIfUnused(e)
}

// touch marks d, in the cache, the most recently used. s.mu is held.
func (s *snapshots) touch(d verify.Digest) {
	if i := slices.Index(s.order, d); i >= 0 && i < len(s.order)-1 {
		s.order = append(slices.Delete(s.order, i, i+1), d)
	}
}

// release gives back a reference to e's snapshot.
func (s *snapshots) release(e *snapEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.refs--
	s.closeIfUnused(e)
}

// closeIfUnused closes e's snapshot when neither the cache nor a request
// holds it. s.mu is held.
func (s *snapshots) closeIfUnused(e *snapEntry) {
	if e.cached || e.refs > 0 || e.snap == nil {
		return
	}
	e.snap.Close()
	e.snap = nil
	s.open--
}

// probe looks d's manifest up in the store, unless a load knows it: a
// manifest the store does not hold is an error matching store.ErrNotFound,
// remembered for absentFor. The manifest is opened, not read; a store
// that cannot say (an error other than not found, or no Open) leaves the
// answer to the load, which may find a local copy.
func (s *snapshots) probe(ctx context.Context, d verify.Digest) error {
	if s.known.Has(d) {
		return nil
	}
	if at, ok := s.absent.Get(d); ok && time.Since(at) < absentFor {
		return fmt.Errorf("no manifest %s in the store (looked up %v ago): %w", d, time.Since(at).Round(time.Millisecond), store.ErrNotFound)
	}
	o, ok := s.store.(opener)
	if !ok {
		return nil
	}
	rc, _, err := o.Open(ctx, verify.ManifestKey(d))
	if err == nil {
		rc.Close()
		return nil
	}
	if notFound(err) {
		s.absent.Put(d, time.Now())
		return fmt.Errorf("no manifest %s in the store: %w", d, store.ErrNotFound)
	}
	return nil
}

// notFound reports whether err is a store's answer for a key it does not
// hold.
func notFound(err error) bool {
	return errors.Is(err, store.ErrNotFound) || errors.Is(err, iofs.ErrNotExist)
}

// stats returns the snapshots kept, being loaded and open (loaded and
// not closed: the tables that may hold mappings).
func (s *snapshots) stats() (kept, loading, open int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cache), len(s.loading), s.open
}

// cloneMember returns m with strings of its own (a Table's share its
// memory, which is unmapped when its snapshot is closed).
func cloneMember(m verify.Member) verify.Member {
	c := verify.Member{ID: strings.Clone(m.ID), Path: strings.Clone(m.Path), Split: strings.Clone(m.Split),
		Size: m.Size, Digest: strings.Clone(m.Digest), CAS: strings.Clone(m.CAS)}
	if m.S3 != nil {
		c.S3 = &verify.S3Source{Bucket: strings.Clone(m.S3.Bucket), Key: strings.Clone(m.S3.Key),
			VersionID: strings.Clone(m.S3.VersionID), ETag: strings.Clone(m.S3.ETag)}
	}
	return c
}

// memberSize is about what a copied member takes.
func memberSize(m verify.Member) int64 {
	n := 160 + len(m.ID) + len(m.Path) + len(m.Split) + len(m.Digest) + len(m.CAS)
	if m.S3 != nil {
		n += 64 + len(m.S3.Bucket) + len(m.S3.Key) + len(m.S3.VersionID) + len(m.S3.ETag)
	}
	return int64(n)
}
