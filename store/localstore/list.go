package localstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pinfs/pinfs/store"
)

var _ store.KeyLister = (*Store)(nil)

// List returns the keys under prefix, sorted: the regular files below the
// store root whose slash-separated path relative to the root starts with
// prefix ("" lists every key). Temporary files of unfinished writes and
// Swap's lock files are not keys and are left out, and so are symbolic
// links, which List does not follow. A prefix below a missing directory
// has no keys.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	infos, err := s.ListInfo(ctx, prefix)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(infos))
	for i, in := range infos {
		keys[i] = in.Key
	}
	return keys, nil
}

var _ store.InfoLister = (*Store)(nil)

// ListInfo is List with each key's size and modification time (the
// file's, without following links).
func (s *Store) ListInfo(ctx context.Context, prefix string) ([]store.KeyInfo, error) {
	dir := path.Dir(prefix + "x") // the directory that holds every key under prefix
	root := s.dir
	if dir != "." {
		p, err := s.path(dir)
		if err != nil {
			return nil, fmt.Errorf("localstore: list %q: %w", prefix, err)
		}
		root = p
	}
	var infos []store.KeyInfo
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil && p == root && errors.Is(err, fs.ErrNotExist) {
			return fs.SkipAll // no such directory: no keys
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name := d.Name()
		if !d.Type().IsRegular() || strings.HasPrefix(name, ".tmp-") || strings.HasPrefix(name, lockPrefix) {
			return nil
		}
		rel, err := filepath.Rel(s.dir, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since the directory was read
		}
		if err != nil {
			return err
		}
		infos = append(infos, store.KeyInfo{Key: key, Size: fi.Size(), Modified: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("localstore: list %q: %w", prefix, err)
	}
	slices.SortFunc(infos, func(a, b store.KeyInfo) int { return strings.Compare(a.Key, b.Key) })
	return infos, nil
}
