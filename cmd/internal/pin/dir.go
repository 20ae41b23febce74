package pin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
	"github.com/pinfs/pinfs/verify/jcs"
)

// errChanged reports a source file that changed while it was pinned.
var errChanged = errors.New("file changed while it was being pinned")

// Dir pins the regular files under dir: their bytes are copied into the
// store's content-addressed area and the members point there. Symbolic
// links and special files are refused rather than silently skipped, so a
// pin never depends on what a link pointed at that day.
func (p *Pinner) Dir(ctx context.Context, dir string) (verify.Digest, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	var items []*item
	var bad []string
	err = filepath.WalkDir(abs, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(abs, name)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !d.Type().IsRegular() {
			bad = append(bad, fmt.Sprintf("%s: not a regular file (%v)", rel, d.Type()))
			return nil
		}
		if err := verify.CheckPath(rel); err != nil {
			bad = append(bad, err.Error())
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		items = append(items, &item{path: rel, size: info.Size(), file: name})
		return nil
	})
	if err != nil {
		return "", err
	}
	if len(bad) > 0 {
		return "", fmt.Errorf("%s: %s", abs, summarize(bad))
	}
	if len(items) == 0 {
		return "", fmt.Errorf("%s: no files to pin", abs)
	}
	type entry struct {
		Path string `json:"path"`
		Size int64  `json:"size"`
	}
	var listing []entry
	for _, it := range items {
		listing = append(listing, entry{it.path, it.size})
	}
	lb, err := jcs.Marshal(listing)
	if err != nil {
		return "", err
	}
	// The URI names the directory by its base name only: the absolute path
	// would make the digest depend on where a checkout happens to live.
	src := verify.Source{ID: "dir", URI: "dir:" + filepath.Base(abs), Listing: verify.SHA256(lb)}
	return p.pin(ctx, src, items)
}

// copyIn stores the bytes of a directory item, whose digest was just
// computed, in the store's content-addressed area and sets its source.
// The file must be unchanged (size and modification time) from before
// hashing until after the copy; a changed file fails the pin.
func (p *Pinner) copyIn(ctx context.Context, it *item, sum b3.Sum) error {
	f, err := os.Open(it.file)
	if err != nil {
		return err
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return err
	}
	if before.Size() != it.size {
		return errChanged
	}
	obj, err := p.Store.PutCAS(ctx, sum.String(), f, it.size)
	if err != nil {
		return err
	}
	after, err := os.Stat(it.file)
	if err != nil {
		return err
	}
	if after.Size() != it.size || !after.ModTime().Equal(before.ModTime()) {
		return errChanged
	}
	return setSource(&it.m, obj)
}

// setSource records where the pinned bytes of m live.
func setSource(m *verify.Member, obj store.Object) error {
	if err := obj.Validate(); err != nil {
		return err
	}
	if obj.CAS != "" {
		m.CAS = obj.CAS
		return nil
	}
	m.S3 = &verify.S3Source{Bucket: obj.Bucket, Key: obj.Key, VersionID: obj.VersionID}
	return nil
}
