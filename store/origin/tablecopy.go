package origin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pinfs/pinfs/store"
)

// tableCopies are the origin's verified copies of the member tables it
// served, one file a table in dir, named by its SHA-256: a copy is
// written as the table streams from the store and renamed into place
// only once the whole table hashed to its name. It also remembers when
// each table was last read from the store, for the bypass's rate limit.
// It is safe for concurrent use.
type tableCopies struct {
	dir     string // "": no copies, every table is read from the store
	refresh time.Duration

	mu      sync.Mutex
	filling map[string]chan struct{} // closed when the read of a table from the store ends
	read    map[string]time.Time     // when each table was last read from the store, within refresh
}

// errTooSoon: a member table was read from the store less than
// Config.TableRefresh ago and left no good copy.
var errTooSoon = errors.New("read from the store moments ago without a good copy; retry later")

// tableSource is where one request reads a table: local, a verified copy,
// or (local nil) the store, keeping a copy when fill. done must be
// called once the request is over.
type tableSource struct {
	local *os.File
	size  int64
	fill  bool
	done  func()
}

// source returns where a request reads table hexd, a bypass request if
// bypass: the copy, unless there is none or a bypass finds that the store
// was not read for it in the last refresh. A request that finds the table
// being read from the store waits (at most until ctx ends) for that read
// and its copy. A HEAD request (head) reads no table: it opens the copy
// or the store, and never waits.
func (c *tableCopies) source(ctx context.Context, hexd string, bypass, head bool) (tableSource, error) {
	nop := func() {}
	for {
		c.mu.Lock()
		ch := c.filling[hexd]
		if ch != nil && !head {
			c.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return tableSource{}, ctx.Err()
			}
		}
		recent := time.Since(c.read[hexd]) < c.refresh
		if f, fi, err := c.openCopy(hexd); err == nil {
			if !bypass || recent || head {
				c.mu.Unlock()
				return tableSource{local: f, size: fi.Size(), done: nop}, nil
			}
			f.Close()
		}
		switch {
		case head || c.dir == "":
			c.mu.Unlock()
			return tableSource{size: -1, done: nop}, nil
		case recent:
			c.mu.Unlock()
			return tableSource{}, fmt.Errorf("member table %s: %w", hexd, errTooSoon)
		}
		ch = make(chan struct{})
		c.filling[hexd] = ch
		c.mu.Unlock()
		return tableSource{size: -1, fill: true, done: func() {
			c.mu.Lock()
			delete(c.filling, hexd)
			c.mu.Unlock()
			close(ch)
		}}, nil
	}
}

// openCopy opens the copy of table hexd, if it is a regular file.
func (c *tableCopies) openCopy(hexd string) (*os.File, os.FileInfo, error) {
	if c.dir == "" {
		return nil, nil, os.ErrNotExist
	}
	return store.OpenRegular(filepath.Join(c.dir, hexd), os.O_RDONLY, 0)
}

// began records that table hexd is being read from the store now.
func (c *tableCopies) began(hexd string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for k, t := range c.read {
		if now.Sub(t) >= c.refresh {
			delete(c.read, k)
		}
	}
	c.read[hexd] = now
}

// forget lets the next request for table hexd read the store at once:
// its last read verified but no copy could be kept.
func (c *tableCopies) forget(hexd string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.read, hexd)
}

// drop removes the copy f of table hexd, found not to match its name,
// and lets the next request read the store for it at once.
func (c *tableCopies) drop(hexd string, f *os.File) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.read, hexd)
	p := filepath.Join(c.dir, hexd)
	fi, err := f.Stat()
	if pi, perr := os.Lstat(p); err == nil && perr == nil && os.SameFile(fi, pi) {
		os.Remove(p)
	}
}

// newFill returns the copy of table hexd to write as it is read from the
// store; nil if it cannot be created (the table is then served without
// keeping a copy).
func (c *tableCopies) newFill(hexd string) *fillCopy {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil
	}
	f, err := os.CreateTemp(c.dir, ".tmp-*")
	if err != nil {
		return nil
	}
	return &fillCopy{f: f, path: filepath.Join(c.dir, hexd)}
}

// fillCopy is a copy being written; nil writes nothing.
type fillCopy struct {
	f    *os.File
	path string
	err  error
}

func (k *fillCopy) write(p []byte) {
	if k == nil || k.err != nil {
		return
	}
	_, k.err = k.f.Write(p)
}

// end keeps the copy if verified (the whole table was written and hashed
// to its name), and removes it otherwise; it reports whether it kept it.
func (k *fillCopy) end(verified bool) bool {
	if k == nil {
		return false
	}
	err := k.f.Close()
	if verified && k.err == nil && err == nil && os.Rename(k.f.Name(), k.path) == nil {
		return true
	}
	os.Remove(k.f.Name())
	return false
}
