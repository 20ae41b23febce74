package verify

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/verify/b3"
)

// An index is a directory <dir>/<table hex>.v<IndexVersion> holding a file
// per section and a header file, each 0600 in a 0700 directory owned by
// the user. It is written into a temporary directory beside it, synced
// and renamed into place, so that it is whole or absent.

// indexName returns the name of the index of table td.
func indexName(td Digest) string {
	return fmt.Sprintf("%s.v%d", strings.TrimPrefix(string(td), "sha256:"), IndexVersion)
}

const headerFile = "header"

// maxHeader bounds a header file: 32 bytes per 64 KiB of sections, for
// sections of up to 1 TiB.
const maxHeader = 1 << 29

// errNoIndex is the error of an index that is not there.
var errNoIndex = errors.New("no index")

// fileSink writes the sections of a Table into a new index in dir. When a
// write fails (a full disk) it reads back what it wrote and goes on in
// memory, saying so once: the table is then served from memory.
type fileSink struct {
	dir, tmp, final string
	log             *slog.Logger
	f               [nsec]*os.File
	buf             [nsec][]byte
	written         [nsec]int64
	hash            [nsec]chunkHasher
	maps            [nsec][]byte
	mem             *memSink // once writing failed
	lock            *os.File // the temporary directory, flocked while it is written
}

// sinkBuffer is how much of a section is written at once.
const sinkBuffer = 1 << 20

// newFileSink starts an index of table td in dir. need is the space the
// index is expected to take; a dir without it gets an error, as does one
// that cannot be written.
func newFileSink(dir string, td Digest, need int64, log *slog.Logger) (*fileSink, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	removeStale(dir)
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && int64(st.Bavail)*int64(st.Bsize) < need {
		return nil, fmt.Errorf("%s has %d bytes free, the index needs about %d", dir, int64(st.Bavail)*int64(st.Bsize), need)
	}
	tmp, err := os.MkdirTemp(dir, tmpPrefix+indexName(td)+"-")
	if err != nil {
		return nil, err
	}
	s := &fileSink{dir: dir, tmp: tmp, final: filepath.Join(dir, indexName(td)), log: log}
	if s.lock, err = lockDir(tmp, false); err != nil {
		s.abort()
		return nil, err
	}
	for k := range nsec {
		f, err := os.OpenFile(filepath.Join(tmp, secFiles[k]), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			s.abort()
			return nil, err
		}
		s.f[k] = f
	}
	return s, nil
}

const tmpPrefix = ".tmp-"

// removeStale removes temporary indexes left by a process that died while
// writing one: a live writer holds a lock on its directory. One younger
// than staleAfter may not be locked yet.
func removeStale(dir string) {
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		if !strings.HasPrefix(e.Name(), tmpPrefix) {
			continue
		}
		fi, err := e.Info()
		if err != nil || time.Since(fi.ModTime()) < staleAfter {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if l, err := lockDir(p, true); err == nil {
			os.RemoveAll(p)
			l.Close()
		}
	}
}

const staleAfter = time.Minute

// lockDir takes an exclusive flock of directory p, failing at once when
// another holds it and try is set. Closing the file releases it.
func lockDir(p string, try bool) (*os.File, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	how := unix.LOCK_EX
	if try {
		how |= unix.LOCK_NB
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (s *fileSink) write(k sec, b []byte) error {
	if s.mem != nil {
		return s.mem.write(k, b)
	}
	s.hash[k].write(b)
	s.buf[k] = append(s.buf[k], b...)
	if len(s.buf[k]) >= sinkBuffer {
		return s.flush(k)
	}
	return nil
}

// flush writes the buffer of section k and starts its writeback, so that
// the sync at the end has little left to do.
func (s *fileSink) flush(k sec) error {
	if len(s.buf[k]) == 0 {
		return nil
	}
	if _, err := s.f[k].Write(s.buf[k]); err != nil {
		return s.fallBack(err)
	}
	unix.SyncFileRange(int(s.f[k].Fd()), s.written[k], int64(len(s.buf[k])), unix.SYNC_FILE_RANGE_WRITE)
	s.written[k] += int64(len(s.buf[k]))
	s.buf[k] = s.buf[k][:0]
	return nil
}

// fallBack moves what was written into memory after a failed write.
func (s *fileSink) fallBack(cause error) error {
	s.log.Warn("cannot write the member table's index; serving the table from memory", "dir", s.dir, "err", cause)
	m := &memSink{}
	for k := range nsec {
		b := make([]byte, s.written[k], s.written[k]+int64(len(s.buf[k])))
		if _, err := s.f[k].ReadAt(b, 0); err != nil && s.written[k] > 0 {
			s.abort()
			return fmt.Errorf("reading back index section %s: %w", secFiles[k], err)
		}
		m.b[k] = append(b, s.buf[k]...)
	}
	s.abort()
	s.mem = m
	return nil
}

func (s *fileSink) view(k sec) ([]byte, error) {
	if s.mem != nil {
		return s.mem.view(k)
	}
	if err := s.flush(k); err != nil {
		return nil, err
	}
	if s.mem != nil {
		return s.mem.view(k)
	}
	return s.mapSection(k)
}

func (s *fileSink) mapSection(k sec) ([]byte, error) {
	if s.maps[k] != nil || s.written[k] == 0 {
		return s.maps[k], nil
	}
	b, err := mmap(int(s.f[k].Fd()), 0, int(s.written[k]), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", secFiles[k], err)
	}
	s.maps[k] = b
	return b, nil
}

// errNoTable is the error of finishing an index whose table's read
// failed: its files are removed.
var errNoTable = errors.New("verify: the member table's read failed; its index is not kept")

// finish writes the header and returns the layout over the mapped
// sections; commit makes the index the one later opens find. A nil h
// (the table's read failed) removes the index's files instead.
func (s *fileSink) finish(h *header) (*layout, error) {
	if h == nil { // the table's read failed (parseTableFrom): nothing to finish
		s.abort()
		return nil, errNoTable
	}
	for k := range nsec {
		if s.mem == nil {
			if err := s.flush(k); err != nil {
				return nil, err
			}
		}
	}
	if s.mem != nil {
		return s.mem.finish(h)
	}
	l := &layout{}
	for k := range nsec {
		h.lens[k] = s.written[k]
		h.sums[k] = s.hash[k].finish()
		b, err := s.mapSection(k)
		if err != nil {
			s.abort()
			return nil, err
		}
		l.b[k] = b // written and hashed by this process: trusted as it is
		if b != nil {
			l.maps = append(l.maps, b)
		}
	}
	hf, err := os.OpenFile(filepath.Join(s.tmp, headerFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, err = hf.Write(h.encode())
		if cerr := hf.Sync(); err == nil {
			err = cerr
		}
		if cerr := hf.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		s.log.Warn("cannot write the member table's index; serving the table from memory", "dir", s.dir, "err", err)
		s.abort()
	}
	return l, nil
}

// commit syncs the index and renames it into place. An index that another
// process put there first is kept, and this one removed.
func (s *fileSink) commit() error {
	if s.mem != nil || s.tmp == "" {
		return nil
	}
	defer s.closeFiles()
	for _, f := range s.f {
		if err := f.Sync(); err != nil {
			return s.failCommit(err)
		}
	}
	if err := syncDir(s.tmp); err != nil {
		return s.failCommit(err)
	}
	if err := os.Rename(s.tmp, s.final); err != nil {
		os.RemoveAll(s.tmp)
		if errors.Is(err, fs.ErrExist) || errors.Is(err, unix.ENOTEMPTY) {
			return nil
		}
		return s.failCommit(err)
	}
	return syncDir(s.dir)
}

func (s *fileSink) failCommit(err error) error {
	s.abort()
	return fmt.Errorf("keeping the index in %s: %w", s.dir, err)
}

func (s *fileSink) closeFiles() {
	if s.lock != nil {
		s.lock.Close()
		s.lock = nil
	}
	for k, f := range s.f {
		if f != nil {
			f.Close()
			s.f[k] = nil
		}
	}
}

// unmap unmaps the sections mapped for a table whose check failed: no
// Table holds them.
func (s *fileSink) unmap() {
	for k, b := range s.maps {
		if b != nil {
			munmap(b)
			s.maps[k] = nil
		}
	}
}

// abort removes the temporary index; mapped sections stay readable.
func (s *fileSink) abort() {
	s.closeFiles()
	if s.tmp != "" {
		os.RemoveAll(s.tmp)
		s.tmp = ""
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// chunkHasher computes the digests of the 64 KiB chunks of a section as
// it is written.
type chunkHasher struct {
	pend []byte
	sums []b3.Sum
}

func (c *chunkHasher) write(b []byte) {
	const size = 1 << chunkShift
	for len(b) > 0 {
		if len(c.pend) == 0 && len(b) >= size {
			c.sums = append(c.sums, b3.Of(b[:size]))
			b = b[size:]
			continue
		}
		n := min(size-len(c.pend), len(b))
		c.pend = append(c.pend, b[:n]...)
		b = b[n:]
		if len(c.pend) == size {
			c.sums = append(c.sums, b3.Of(c.pend))
			c.pend = c.pend[:0]
		}
	}
}

func (c *chunkHasher) finish() []b3.Sum {
	if len(c.pend) > 0 {
		c.sums = append(c.sums, b3.Of(c.pend))
		c.pend = c.pend[:0]
	}
	return c.sums
}
