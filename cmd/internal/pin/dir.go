package pin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

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
//
// Each file is opened once, beneath dir and without following a link, and
// must be the regular file the walk listed (same device and inode); it is
// hashed and copied from that one descriptor. A file swapped for a link, a
// FIFO or another file after the walk, or changed while it is pinned,
// fails the pin, which names it.
func (p *Pinner) Dir(ctx context.Context, dir string) (verify.Digest, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	root, err := openRoot(abs)
	if err != nil {
		return "", err
	}
	defer root.close()
	var items []*item
	var bad []string
	err = filepath.WalkDir(abs, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == abs {
			return sameRoot(root, d)
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
		id, err := idOf(info)
		if err != nil {
			return err
		}
		items = append(items, &item{path: rel, size: info.Size(), file: name, dir: root, id: id})
		return nil
	})
	if err != nil {
		return "", err
	}
	if p.afterWalk != nil {
		p.afterWalk()
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

// sameRoot checks that the directory the walk starts from is the one held
// open as root.
func sameRoot(root *dirRoot, d fs.DirEntry) error {
	if !d.IsDir() {
		return fmt.Errorf("%s: not a directory (%v)", root.path, d.Type())
	}
	info, err := d.Info()
	if err != nil {
		return err
	}
	id, err := idOf(info)
	if err != nil {
		return err
	}
	if err := checkDir(root.fd, id); err != nil {
		return fmt.Errorf("%s: %w", root.path, err)
	}
	return nil
}

// pinFile hashes a directory item and stores its bytes in the store's
// content-addressed area, all from one descriptor: the file is hashed,
// then read again from its start by PutCAS, which hashes what it stores
// and refuses bytes of another digest. The second read costs little (the
// bytes are in the page cache) and keeps the Store interface as it is.
// A file whose size, modification or change time differ at the end from
// when it was opened (fstat on the same descriptor), or whose stored bytes
// do not hash to the digest, fails with errChanged.
func (p *Pinner) pinFile(ctx context.Context, it *item) (b3.Sum, []byte, error) {
	f, st, err := it.dir.open(it.path, it.id, it.size)
	if err != nil {
		return b3.Sum{}, nil, err
	}
	defer f.Close()
	sum, outboard, err := b3.Encode(f, it.size)
	if err != nil {
		return b3.Sum{}, nil, changedOr(f, st, err)
	}
	if p.afterHash != nil {
		p.afterHash(it.file)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return b3.Sum{}, nil, err
	}
	obj, err := p.Store.PutCAS(ctx, sum.String(), f, it.size)
	if errors.Is(err, b3.ErrMismatch) {
		return b3.Sum{}, nil, errChanged
	}
	if err = changedOr(f, st, err); err != nil {
		return b3.Sum{}, nil, err
	}
	if err := setSource(&it.m, obj); err != nil {
		return b3.Sum{}, nil, err
	}
	return sum, outboard, nil
}

// changedOr returns errChanged if the file open at f changed since st,
// and err otherwise: a file that changed explains a short read.
func changedOr(f *os.File, st *unix.Stat_t, err error) error {
	if cerr := unchanged(f, st); cerr != nil {
		return cerr
	}
	return err
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
