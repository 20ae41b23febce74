package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

// Log returns the gate's history, newest first: the head and every record
// its Prev chain reaches, down to generation 1. It checks every link and
// fails at the first one that does not hold, naming it: a record missing
// from records/ (a gap), one whose bytes do not hash to its digest
// (tampered), or a predecessor that is not of the generation just below,
// of another gate, or that a commit could not have been made from (see
// checkSuccessor). The head must be the newest record (see current). A
// gate that does not exist fails with an error wrapping ErrNoGate.
func (g *Gate) Log(ctx context.Context) ([]*Record, error) {
	s, err := g.current(ctx, true, false)
	if err != nil {
		return nil, err
	}
	return s.hist, nil
}

// state is a gate's head as current read and checked it.
type state struct {
	head   *Record       // nil: the gate has no head
	digest verify.Digest // of the head's bytes
	rev    string        // the store's revision of them
	hist   []*Record     // the head and the chain checked below it (see chain)
}

// errHeadDeleted is wrapped by current when a gate has no head but
// records/ holds records: a pinfs writer never deletes a head, and stores
// a record only once a head holds it.
var errHeadDeleted = errors.New("the head was deleted")

// current lists records/, then reads the head and checks it: its chain
// must reach generation 1 (see chain; with full every link is read again,
// as Log does) and no record under records/ may have a greater generation
// than the head. A record enters records/ only once the head holds it
// (see Update), so a greater one, listed before the head was read, means
// the head was set back to an older record, which drops the fences and
// history after it; a record there that is not one of this gate's, or
// whose bytes do not hash to its name, is refused too, since it could hide
// one.
//
// Only a head that checked out has its own record looked at. One missing
// from records/ (a commit between its two writes, or one that stopped
// there) is stored; with mustHeal a failure to store it is an error, and
// without (a reader, perhaps with read-only credentials) it is not, since
// the head's own bytes are all that record holds.
//
// A gate without a head fails with an error wrapping ErrNoGate (and s
// has no head) when records/ is empty, and with one wrapping
// errHeadDeleted when it is not.
func (g *Gate) current(ctx context.Context, full, mustHeal bool) (*state, error) {
	prefix := recordsPrefix(g.name)
	keys, err := g.st.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("gate %s: list %s: %w", g.name, prefix, err)
	}
	listed := g.recordDigests(keys)
	pre, err := g.prefetch(ctx, listed, full)
	if err != nil {
		return nil, err
	}
	s := &state{}
	s.head, s.digest, s.rev, err = g.load(ctx)
	if errors.Is(err, ErrNoGate) && len(keys) > 0 {
		return nil, fmt.Errorf("gate %s: %s is missing but %s holds %d records of its history: %w",
			g.name, HeadKey(g.name), prefix, len(keys), errHeadDeleted)
	}
	if err != nil {
		return s, err
	}
	if s.hist, err = g.chain(ctx, pre, s.head, s.digest, !full); err != nil {
		return nil, err
	}
	if err := g.newest(ctx, pre, s.head, listed); err != nil {
		return nil, err
	}
	if !slices.Contains(listed, s.digest) { // else newest read and checked it
		if err := g.own(ctx, s.head, s.digest, mustHeal); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// recordDigests returns the digests of the records under keys (listed
// under records/), skipping a key that names none.
func (g *Gate) recordDigests(keys []string) []verify.Digest {
	var ds []verify.Digest
	for _, k := range keys {
		hex, ok := strings.CutPrefix(k, recordsPrefix(g.name)+"sha256/")
		if !ok {
			continue // not a record pinfs reads
		}
		if d, err := verify.ParseDigest("sha256:" + hex); err == nil && d.Hex() == hex {
			ds = append(ds, d)
		}
	}
	return ds
}

// recordsPrefix is where gate name's records are stored.
func recordsPrefix(name string) string { return "gates/" + name + "/records/" }

// own checks that records/ holds head's bytes (digest d) under d, and
// stores them there if it holds nothing (see current for mustHeal). The
// head must have checked out: a head that did not is never stored.
func (g *Gate) own(ctx context.Context, head *Record, d verify.Digest, mustHeal bool) error {
	_, err := g.record(ctx, nil, d, head.Generation)
	if !errors.Is(err, errGap) {
		return err
	}
	data, err := head.encode()
	if err == nil {
		err = g.st.Put(ctx, RecordKey(g.name, d), data)
	}
	if err != nil && mustHeal {
		return fmt.Errorf("gate %s: store the head's record (generation %d): %w", g.name, head.Generation, err)
	}
	return nil
}

// newest checks that no record of listed (the digests under records/,
// listed before head was read) has a greater generation than head. A
// record's generation is read once per process (its bytes are named by
// their digest); pre holds the records prefetch read.
func (g *Gate) newest(ctx context.Context, pre map[verify.Digest][]byte, head *Record, listed []verify.Digest) error {
	var top int64
	var topDigest verify.Digest
	for _, d := range listed {
		gen, ok := generations.gen(g.name, d)
		if !ok {
			data, err := g.get(ctx, pre, d)
			if errors.Is(err, store.ErrNotFound) {
				continue // gone since the listing
			}
			if err != nil {
				return fmt.Errorf("gate %s: %w", g.name, err)
			}
			r, err := g.parse(d, data)
			if err != nil {
				return fmt.Errorf("gate %s: records/ holds what is not a record of this gate: %w", g.name, err)
			}
			gen = r.Generation
		}
		if gen > top {
			top, topDigest = gen, d
		}
	}
	if top > head.Generation {
		return fmt.Errorf("gate %s: head is at generation %d but records/ holds generation %d (%s): the head was rolled back",
			g.name, head.Generation, top, RecordKey(g.name, topDigest))
	}
	return nil
}

// chain returns head, whose bytes have digest d, and every record its Prev
// chain reaches, newest first, checking every link (see Log); pre holds
// the records prefetch read. A record whose chain was checked is
// remembered for the rest of the process (it names its predecessor by
// digest, so the history it ends cannot change); with useKnown a walk
// stops at one, and without it (Log) every link is read and checked again.
func (g *Gate) chain(ctx context.Context, pre map[verify.Digest][]byte, head *Record, d verify.Digest, useKnown bool) ([]*Record, error) {
	out := []*Record{head}
	if useKnown && checked.has(g.name, d) {
		return out, nil
	}
	digests := []verify.Digest{d} // of out's records, which the walk knows
	for cur := head; cur.Prev != ""; {
		if useKnown && checked.has(g.name, cur.Prev) {
			break
		}
		prev, err := g.record(ctx, pre, cur.Prev, cur.Generation-1)
		if err != nil {
			return nil, err
		}
		if err := checkSuccessor(prev, cur.Prev, cur); err != nil {
			return nil, fmt.Errorf("gate %s: broken history: %w", g.name, err)
		}
		out, digests = append(out, prev), append(digests, cur.Prev)
		cur = prev
	}
	for i, r := range out {
		checked.add(g.name, digests[i], r.Generation)
	}
	return out, nil
}

var (
	// checked holds the records, by gate name and digest, whose chain back
	// to generation 1 this process has checked.
	checked = &checkedSet{}
	// generations holds the generation of every record this process read
	// and found to hash to its name.
	generations = &checkedSet{}
)

// maxChecked bounds checkedSet: when full it starts again empty.
const maxChecked = 1 << 14

// checkedSet maps record digests, per gate, to their generation; it is
// safe for concurrent use.
type checkedSet struct {
	mu sync.Mutex
	m  map[string]int64
}

func (c *checkedSet) has(name string, d verify.Digest) bool {
	_, ok := c.gen(name, d)
	return ok
}

func (c *checkedSet) gen(name string, d verify.Digest) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gen, ok := c.m[name+" "+string(d)]
	return gen, ok
}

func (c *checkedSet) add(name string, d verify.Digest, gen int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxChecked {
		c.m = map[string]int64{}
	}
	c.m[name+" "+string(d)] = gen
}

// errGap is wrapped by record when the record is missing from records/.
var errGap = errors.New("a gap")

// record reads and checks the record with digest d, which the history
// says is generation gen (see get for pre).
func (g *Gate) record(ctx context.Context, pre map[verify.Digest][]byte, d verify.Digest, gen int64) (*Record, error) {
	data, err := g.get(ctx, pre, d)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("gate %s: broken history: generation %d (%s) is missing from records/ (%w)", g.name, gen, d, errGap)
	}
	if err != nil {
		return nil, fmt.Errorf("gate %s: generation %d: %w", g.name, gen, err)
	}
	r, err := g.parse(d, data)
	if err != nil {
		return nil, fmt.Errorf("gate %s: broken history: generation %d: %w", g.name, gen, err)
	}
	return r, nil
}

// get reads the bytes stored under records/ for digest d: those in pre
// (read by prefetch), or else from the store.
func (g *Gate) get(ctx context.Context, pre map[verify.Digest][]byte, d verify.Digest) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if data, ok := pre[d]; ok {
		return data, nil
	}
	return g.st.Get(ctx, RecordKey(g.name, d))
}

// prefetchJobs is how many records prefetch reads at a time, maxPrefetch
// the most it reads in one call and maxPrefetchBytes the most it holds (a
// record is about 1 KiB).
const (
	prefetchJobs     = 16
	maxPrefetch      = 4096
	maxPrefetchBytes = 64 << 20
)

// prefetch reads, prefetchJobs at a time (store.GetAll), the records of
// listed whose generation this process does not know yet (with all,
// every one: a full walk, Log's, reads every link again), so that the
// chain walk and newest, which need each of them, do not wait for one GET
// per generation in turn (a gate of a year of daily changes is 365 round
// trips to S3). It returns their bytes by digest, for get, which the walk
// still checks against their digest; a record gone since the listing is
// left to the walk, and so is every record when together they hold more
// than maxPrefetchBytes.
func (g *Gate) prefetch(ctx context.Context, listed []verify.Digest, all bool) (map[verify.Digest][]byte, error) {
	var todo []verify.Digest
	var keys []string
	for _, d := range listed {
		if !all && generations.has(g.name, d) {
			continue
		}
		todo, keys = append(todo, d), append(keys, RecordKey(g.name, d))
		if len(todo) == maxPrefetch {
			break
		}
	}
	if len(todo) < 2 {
		return nil, nil
	}
	got, err := store.GetAll(ctx, g.st, keys, prefetchJobs, maxPrefetchBytes, "records")
	if errors.Is(err, store.ErrTooLarge) {
		return nil, nil // read one at a time as the walk needs them
	}
	if err != nil {
		return nil, fmt.Errorf("gate %s: %w", g.name, err)
	}
	pre := make(map[verify.Digest][]byte, len(todo))
	for i, data := range got {
		if data != nil {
			pre[todo[i]] = data
		}
	}
	return pre, nil
}

// parse checks that data, stored under records/ for digest d, hashes to d
// and is a record of this gate, and remembers its generation.
func (g *Gate) parse(d verify.Digest, data []byte) (*Record, error) {
	if got := verify.SHA256(data); got != d {
		return nil, fmt.Errorf("record %s holds bytes of digest %s (tampered)", d, got)
	}
	r, err := parseRecord(g.name, data)
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", d, err)
	}
	generations.add(g.name, d, r.Generation)
	return r, nil
}

// Names returns the names of the gates in a store, sorted: every
// gates/NAME/head with a valid NAME.
func Names(ctx context.Context, l store.KeyLister) ([]string, error) {
	keys, err := l.List(ctx, "gates/")
	if err != nil {
		return nil, fmt.Errorf("gate: list gates: %w", err)
	}
	var names []string
	for _, k := range keys {
		name, rest, _ := strings.Cut(strings.TrimPrefix(k, "gates/"), "/")
		if rest == "head" && CheckName(name) == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}
