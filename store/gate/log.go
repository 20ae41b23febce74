package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

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
	if _, err := g.record(ctx, d, head.Generation); err != nil {
		return nil, err
	}
	out := []*Record{head}
	for cur := head; cur.Prev != ""; {
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
	return out, nil
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
