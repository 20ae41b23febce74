// Package derivations keeps derivation records (verify/derive) in a store.
//
// Layout, relative to the store root:
//
//	derivations/sha256/<key hex>                       the record of a key
//	derivations/outputs/sha256/<output hex>/<key hex>  the same bytes: the index by output
//
// A key's record is created exclusively (store.Creator) and never
// replaced: the first derivation of a key to finish fixes its output, and
// a later one that gives other bytes is drift, which the caller reports.
// To record other bytes, a derivation takes a new transform version.
// The index entry is written after the record with the record's own
// bytes, so it is content addressed by its key and a repeated Put is
// harmless; a crash between the two leaves a record the next Save indexes.
package derivations

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/derive"
)

// Store is what records need from a store: blobs, an exclusive create and
// a listing. localstore and s3store have all three.
type Store interface {
	store.Blobs
	store.Creator
	store.KeyLister
}

// KeyOf returns the store key of the record of key.
func KeyOf(key verify.Digest) string { return "derivations/sha256/" + key.Hex() }

// outputPrefix returns the prefix under which the records of output d are indexed.
func outputPrefix(d verify.Digest) string { return "derivations/outputs/sha256/" + d.Hex() + "/" }

// Save creates r's record exclusively. When r.Key has a record already,
// Save returns that one instead, and the caller compares its Output with
// r's. Either way the output index holds the returned record.
func Save(ctx context.Context, st store.Blobs, r *derive.Record) (*derive.Record, error) {
	s, err := records(st)
	if err != nil {
		return nil, err
	}
	b, err := r.Encode()
	if err != nil {
		return nil, err
	}
	saved := r
	err = s.Create(ctx, KeyOf(r.Key), b)
	if errors.Is(err, store.ErrExist) {
		if saved, err = ByKey(ctx, st, r.Key); err == nil {
			b, err = saved.Encode()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("derivation %s: saving the record: %w", r.Key, err)
	}
	if err := s.Put(ctx, outputPrefix(saved.Output)+saved.Key.Hex(), b); err != nil {
		return nil, fmt.Errorf("derivation %s: indexing the record by output: %w", r.Key, err)
	}
	return saved, nil
}

// ErrNoRecord is wrapped by Find's error for a digest that is neither a
// key nor the output of a record.
var ErrNoRecord = errors.New("no derivation record")

// Find returns the records d names: the record of key d, or else the
// records whose output is d. None is an error wrapping ErrNoRecord.
func Find(ctx context.Context, st store.Blobs, d verify.Digest) ([]*derive.Record, error) {
	r, err := ByKey(ctx, st, d)
	if err == nil {
		return []*derive.Record{r}, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	rs, err := ByOutput(ctx, st, d)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%w for %s in store %s", ErrNoRecord, d, st)
	}
	return rs, nil
}

// ByKey returns the record of key, or an error wrapping store.ErrNotFound
// when there is none. A record that does not parse, or is not the record
// of key, fails with an error wrapping derive.ErrInvalid.
func ByKey(ctx context.Context, st store.Blobs, key verify.Digest) (*derive.Record, error) {
	b, err := st.Get(ctx, KeyOf(key))
	if err != nil {
		return nil, fmt.Errorf("derivation %s: %w", key, err)
	}
	r, err := derive.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("derivation %s in %s: %w", key, st, err)
	}
	if r.Key != key {
		return nil, fmt.Errorf("derivation %s in %s: holds the record of %s: %w", key, st, r.Key, derive.ErrInvalid)
	}
	return r, nil
}

// ByOutput returns the records whose output is d, sorted by key, or none.
// Each index entry must be its key's record byte for byte: the key covers
// neither the output nor the time, so a copy edited on its own is refused.
// Several derivations can give the same bytes (a new transform version
// that changed nothing, other parameters that do not matter).
func ByOutput(ctx context.Context, st store.Blobs, d verify.Digest) ([]*derive.Record, error) {
	s, err := records(st)
	if err != nil {
		return nil, err
	}
	prefix := outputPrefix(d)
	keys, err := s.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("derivations of %s: %w", d, err)
	}
	slices.Sort(keys)
	var rs []*derive.Record
	for _, k := range keys {
		name := strings.TrimPrefix(k, prefix)
		b, err := st.Get(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("derivations of %s: %w", d, err)
		}
		r, err := derive.Parse(b)
		if err != nil {
			return nil, fmt.Errorf("derivation index %s in %s: %w", k, st, err)
		}
		if r.Key.Hex() != name || r.Output != d {
			return nil, fmt.Errorf("derivation index %s in %s: holds the record of %s with output %s: %w", k, st, r.Key, r.Output, derive.ErrInvalid)
		}
		// The key does not cover output and time: the index entry must be
		// the key's record itself, byte for byte.
		main, err := st.Get(ctx, KeyOf(r.Key))
		if err != nil {
			return nil, fmt.Errorf("derivation index %s in %s: the record of %s: %w", k, st, r.Key, err)
		}
		if !bytes.Equal(main, b) {
			return nil, fmt.Errorf("derivation index %s in %s: differs from the record of %s: %w", k, st, r.Key, derive.ErrInvalid)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// records returns st as a Store, or says what it lacks.
func records(st store.Blobs) (Store, error) {
	s, ok := st.(Store)
	if !ok {
		return nil, fmt.Errorf("store %v cannot keep derivation records: it cannot create a key exclusively or list keys", st)
	}
	return s, nil
}
