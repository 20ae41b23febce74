package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

// Log returns the gate's history, newest first: the head and every record
// its Prev chain reaches, down to generation 1. It checks every link and
// fails at the first one that does not hold, naming it: a record missing
// from records/ (a gap), one whose bytes do not hash to its digest
// (tampered), or a predecessor that is not of the generation just below,
// of another gate, or that a commit could not have been made from (see
// checkSuccessor). The head's own copy under records/ must hold the head's
// bytes. A gate that does not exist fails with an error wrapping ErrNoGate.
func (g *Gate) Log(ctx context.Context) ([]*Record, error) {
	head, d, _, err := g.load(ctx)
	if err != nil {
		return nil, err
	}
	return g.chain(ctx, head, d, false)
}

// chain returns head, whose bytes have digest d, and every record its Prev
// chain reaches, newest first, checking every link (see Log). A record
// whose chain was checked is remembered for the rest of the process (it
// names its predecessor by digest, so the history it ends cannot change);
// with useKnown a walk stops at one, and without it (Log) every link is
// read and checked again.
func (g *Gate) chain(ctx context.Context, head *Record, d verify.Digest, useKnown bool) ([]*Record, error) {
	out := []*Record{head}
	if useKnown && checked.has(g.name, d) {
		return out, nil
	}
	if _, err := g.record(ctx, d, head.Generation); err != nil {
		return nil, err
	}
	for cur := head; cur.Prev != ""; {
		if useKnown && checked.has(g.name, cur.Prev) {
			break
		}
		prev, err := g.record(ctx, cur.Prev, cur.Generation-1)
		if err != nil {
			return nil, err
		}
		if err := checkSuccessor(prev, cur.Prev, cur); err != nil {
			return nil, fmt.Errorf("gate %s: broken history: %w", g.name, err)
		}
		out = append(out, prev)
		cur = prev
	}
	for _, r := range out {
		checked.add(g.name, r.RecordDigest())
	}
	return out, nil
}

// checked holds the records, by gate name and digest, whose chain back to
// generation 1 this process has checked.
var checked = &checkedSet{}

// maxChecked bounds checkedSet: when full it starts again empty.
const maxChecked = 1 << 14

// checkedSet is a set of record digests per gate, safe for concurrent use.
type checkedSet struct {
	mu sync.Mutex
	m  map[string]bool
}

func (c *checkedSet) has(name string, d verify.Digest) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[name+" "+string(d)]
}

func (c *checkedSet) add(name string, d verify.Digest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxChecked {
		c.m = map[string]bool{}
	}
	c.m[name+" "+string(d)] = true
}

// record reads and checks the record with digest d, which the history
// says is generation gen.
func (g *Gate) record(ctx context.Context, d verify.Digest, gen int64) (*Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := g.st.Get(ctx, RecordKey(g.name, d))
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("gate %s: broken history: generation %d (%s) is missing from records/ (a gap)", g.name, gen, d)
	}
	if err != nil {
		return nil, fmt.Errorf("gate %s: generation %d: %w", g.name, gen, err)
	}
	if got := verify.SHA256(data); got != d {
		return nil, fmt.Errorf("gate %s: broken history: generation %d: record %s holds bytes of digest %s (tampered)", g.name, gen, d, got)
	}
	r, err := parseRecord(g.name, data)
	if err != nil {
		return nil, fmt.Errorf("gate %s: broken history: generation %d (%s): %w", g.name, gen, d, err)
	}
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

// settle bounds how long checkNew waits for a head to appear over records
// that a concurrent first commit may have stored just before its swap.
var settle = 2 * time.Second

// checkNew is Update's check before it creates the gate: records/ must
// hold no record. A record there with no head is either a concurrent first
// commit between storing its record and swapping the head in, or the
// history of a gate whose head was deleted (on S3 a delete marker does not
// stop If-None-Match), which a new generation 1 would silently drop,
// fences and all. It waits up to settle for a head to appear (then the
// create loses its swap like any other lost race) and otherwise refuses.
func (g *Gate) checkNew(ctx context.Context) error {
	prefix := "gates/" + g.name + "/records/"
	deadline := time.Now().Add(settle)
	for {
		keys, err := g.st.List(ctx, prefix)
		if err != nil {
			return fmt.Errorf("gate %s: list %s: %w", g.name, prefix, err)
		}
		if len(keys) == 0 {
			return nil
		}
		_, _, err = g.st.Load(ctx, HeadKey(g.name))
		switch {
		case err == nil:
			return nil // created meanwhile: the swap from "" loses
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("gate %s: %w", g.name, err)
		case time.Now().After(deadline):
			return fmt.Errorf("gate %s: %s is missing but %s holds %d records of its history: refusing to create the gate again at generation 1 (restore the head from the newest record there, or delete %s if the gate never had a head)",
				g.name, HeadKey(g.name), prefix, len(keys), prefix)
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
