package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Indexer is an optional interface of a Getter that keeps files in a
// local directory (the metadata cache). Fetch writes there an index of
// every member table it verifies and finds without problems, as the
// table streams: the Table's sections, laid out to be mapped, with the
// digests of their 64 KiB chunks in a header that carries its own digest.
// A later Fetch of the same table maps the index instead of reading and
// parsing the table, so that opening a snapshot of any size costs about
// the same, and the Table's memory is what the kernel keeps of the map.
//
// An index is a claim like any file in the directory: its header is
// checked at open (its digest, the table digest and format version it
// names, the manifest's counts), every chunk before it is first read. An
// index that fails at open is removed and rebuilt from the table (and
// said so on IndexLog); one whose chunk fails later is replaced by the
// table rebuilt in memory. A directory that cannot hold the index gets
// none, said so once, and the table is served from memory.
type Indexer interface {
	// IndexDir returns the directory for indexes, or "" for none.
	IndexDir() string
	// IndexLog returns the logger for what happens to indexes.
	IndexLog() *slog.Logger
}

// NoCopyOpener is an optional interface of an Indexer: OpenNoCopy is Open
// without keeping a local copy of the blob (Fetch streams a table it
// indexes through it; the index holds all that the table says).
type NoCopyOpener interface {
	OpenNoCopy(ctx context.Context, key string) (io.ReadCloser, int64, error)
}

// indexer is what Fetch does with an Indexer. A nil *indexer keeps no
// index.
type indexer struct {
	dir string
	log *slog.Logger
}

func indexerOf(g Getter) *indexer {
	x, ok := g.(Indexer)
	if !ok || x.IndexDir() == "" {
		return nil
	}
	log := x.IndexLog()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &indexer{dir: x.IndexDir(), log: log}
}

// open returns the checked snapshot from the index of m's table, or nil
// when there is none to use. Only an index that fails a check (its
// header, digests, sizes, ownership) is removed and rebuilt: one the
// process cannot open or map for want of memory, mappings or files
// (exhausted) is as good as it was, and Fetch fails rather than read the
// table, which would need more of what is short; one that cannot be read
// for another reason of the system is left, and the table read instead.
func (ix *indexer) open(g Getter, m *Manifest) (*Checked, error) {
	if ix == nil {
		return nil, nil
	}
	td, _ := m.Members.Digest()
	path := filepath.Join(ix.dir, indexName(td))
	l, h, err := openIndex(ix.dir, m)
	var errno syscall.Errno
	switch {
	case err == nil:
		t := &Table{n: int(h.members), sorted: h.sorted, idsArePaths: h.idsArePaths, dirs: int(h.dirs)}
		t.cur.Store(l)
		t.repair = repairer(g, m, ix.log, path)
		// Only a table without problems is indexed.
		return &Checked{Manifest: m, Table: t}, nil
	case errors.Is(err, errNoIndex):
	case exhausted(err):
		return nil, fmt.Errorf("member table index %s: %w", path, err)
	case errors.As(err, &errno):
		ix.log.Warn("member table index cannot be read: reading the table", "index", path, "reason", err.Error())
	default:
		ix.log.Warn("member table index not used: rebuilding it from the table", "index", path, "reason", err.Error())
		os.RemoveAll(path)
	}
	return nil, nil
}

// exhausted reports whether err is the system's refusal for want of
// memory, mappings, file descriptors or locked pages: a condition that
// passes, and says nothing of the file.
func exhausted(err error) bool {
	for _, e := range []error{syscall.ENOMEM, syscall.EMFILE, syscall.ENFILE, syscall.EAGAIN} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// sink returns where to build the table td of size bytes (-1 unknown)
// that m says holds members members.
func (ix *indexer) sink(td Digest, size, members int64) sink {
	// Room for the members the manifest announces, but no more than the
	// table can hold: a manifest's count does not reserve memory on its own.
	mem := func() sink { return newMemSink(min(max(members, 0), max(size, 0)/minLine+1), max(size, 0)) }
	if ix == nil {
		return mem()
	}
	s, err := newFileSink(ix.dir, td, max(size, 0), ix.log)
	if err != nil {
		ix.log.Warn("cannot keep the member table's index in the cache dir; serving the table from memory", "dir", ix.dir, "err", err.Error())
		return mem()
	}
	return s
}

// done keeps the index built into s when the table checked out.
func (ix *indexer) done(s sink, c *Checked, err error) {
	fs, ok := s.(*fileSink)
	if !ok {
		return
	}
	if err != nil {
		fs.abort()
		fs.unmap()
		return
	}
	if len(c.Problems) > 0 {
		fs.abort() // the Table is the caller's: Load closes it
		return
	}
	if err := fs.commit(); err != nil {
		ix.log.Warn("cannot keep the member table's index; it serves this process only", "err", err.Error())
		return
	}
	if fs.mem == nil {
		var n int64
		for _, w := range fs.written {
			n += w
		}
		ix.log.Info("member table indexed", "index", fs.final, "bytes", n)
	}
}

// minLine is the length of the shortest canonical member line, newline
// included: {"digest":"","id":"","path":"","size":0}.
const minLine = 41

// repairTimeout bounds reading the table again for a damaged index.
const repairTimeout = 10 * time.Minute

// repairer returns the function that rebuilds, in memory, the Table of
// m's table whose index at path failed a chunk's digest after it was
// opened. The accessor that found it has no context: the read is bounded
// by repairTimeout.
func repairer(g Getter, m *Manifest, log *slog.Logger, path string) func() (*layout, error) {
	return func() (*layout, error) {
		log.Error("member table index failed a digest while in use: removing it and reading the table again", "index", path)
		os.RemoveAll(path)
		ctx, cancel := context.WithTimeout(context.Background(), repairTimeout)
		defer cancel()
		var c *Checked
		var err error
		if o, ok := g.(Opener); ok {
			c, err = openTable(ctx, o, m, nil)
		} else {
			c, _, err = getTable(ctx, g, m)
		}
		if err == nil && len(c.Problems) > 0 {
			err = fmt.Errorf("%d member problems", len(c.Problems))
		}
		if err != nil {
			return nil, err
		}
		return c.Table.layout(), nil
	}
}
