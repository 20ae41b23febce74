package admission

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/gate"
)

// FenceChange advances a gate's tombstone watermark or benchmark fence
// (`pinfs fence`). Entries, when set, are the member ids or BLAKE3
// digests revoked (with Tombstone) or fenced as benchmark data (with
// Benchmark) at the new value.
type FenceChange struct {
	Gate      string
	Tombstone int64 // 0: unchanged
	Benchmark int64 // 0: unchanged
	Entries   []string
	Reason    string
}

// Fence commits c with a conditional write. Fences only move forward: a
// value at or below the gate's is refused. After a lost race it re-reads
// the gate and tries again, since an advance does not depend on what else
// changed. It creates the gate if it does not exist.
func Fence(ctx context.Context, st store.Store, c FenceChange) (*gate.Record, error) {
	if (c.Tombstone > 0) == (c.Benchmark > 0) {
		return nil, fmt.Errorf("fence %s: give exactly one of a tombstone watermark and a benchmark fence, above 0", c.Gate)
	}
	g, err := gate.Open(st, c.Gate)
	if err != nil {
		return nil, err
	}
	var list *gate.Fenced
	if len(c.Entries) > 0 {
		d, n, err := gate.PutList(ctx, st, c.Entries)
		if err != nil {
			return nil, err
		}
		list = &gate.Fenced{List: d, Count: n}
	}
	return g.Update(ctx, true, func(cur *gate.Record) (*gate.Record, error) {
		next := &gate.Record{Op: "fence", Reason: c.Reason}
		if cur != nil {
			next.Digest, next.Policy = cur.Digest, cur.Policy
			next.TombstoneWatermark, next.BenchmarkFence = cur.TombstoneWatermark, cur.BenchmarkFence
			next.Revocations, next.Benchmarks = cur.Revocations, cur.Benchmarks
		}
		advance := func(what string, to int64, at *int64, lists *[]gate.Fenced) error {
			if to <= *at {
				return fmt.Errorf("gate %s: %s is at %d already; a fence only moves forward (asked %d)", c.Gate, what, *at, to)
			}
			*at = to
			if list != nil {
				*lists = append(append([]gate.Fenced(nil), *lists...), gate.Fenced{At: to, List: list.List, Count: list.Count})
			}
			return nil
		}
		var err error
		if c.Tombstone > 0 {
			err = advance("the tombstone watermark", c.Tombstone, &next.TombstoneWatermark, &next.Revocations)
		} else {
			err = advance("the benchmark fence", c.Benchmark, &next.BenchmarkFence, &next.Benchmarks)
		}
		return next, err
	})
}

// ReadList reads a revocation or benchmark list file: one member id or
// blake3:<hex> digest per line; blank lines and lines starting with '#'
// are skipped. A line gate.CheckEntry refuses (a digest that is not
// blake3:<64 lower-case hex>, a control character) fails the whole file
// with an error naming the file and the line. The file is the user's
// (store.ReadUserFile): read through a symbolic link, but a FIFO or
// anything else that is not a regular file, or a file of more than
// store.MaxRecord bytes (as much as a list kept in a store), is refused
// before it is read.
func ReadList(path string) ([]string, error) {
	b, err := store.ReadUserFile(path, store.MaxRecord)
	if err != nil {
		return nil, err // it names path
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := gate.CheckEntry(line); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no member ids or digests", path)
	}
	return out, nil
}
