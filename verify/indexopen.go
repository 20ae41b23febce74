package verify

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// openIndex maps the index of m's table from dir and checks its header:
// the sections are checked chunk by chunk as they are first read.
func openIndex(dir string, m *Manifest) (*layout, *header, error) {
	td, _ := m.Members.Digest()
	p := filepath.Join(dir, indexName(td))
	dfd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOTDIR) {
		// Linux answers a symbolic link under O_NOFOLLOW|O_DIRECTORY
		// with ENOTDIR, as it does a file: either sits where the index
		// goes, and is reported so that it is removed; left, it would make
		// every later index fail to be renamed into place.
		if _, lerr := os.Lstat(p); lerr == nil {
			return nil, nil, fmt.Errorf("%s: not a directory", p)
		}
	}
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil, nil, errNoIndex
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", p, err)
	}
	defer unix.Close(dfd)
	if err := ownedPrivate(dfd, unix.S_IFDIR); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", p, err)
	}
	hb, err := readAt(dfd, headerFile, maxHeader)
	if err != nil {
		return nil, nil, err
	}
	h, err := decodeHeader(hb)
	if err != nil {
		return nil, nil, err
	}
	if err := h.check(m); err != nil {
		return nil, nil, err
	}
	l := &layout{}
	ok := false
	defer func() {
		if !ok {
			l.unmap()
		}
	}()
	for s := range nsec {
		b, err := mapAt(dfd, secFiles[s], h.lens[s])
		if err != nil {
			return nil, nil, err
		}
		if b != nil {
			l.maps = append(l.maps, b)
		}
		l.b[s], l.sums[s] = b, h.sums[s]
		l.done[s] = make([]atomic.Uint64, (len(h.sums[s])+63)/64)
		if b == nil {
			l.sums[s] = nil // nothing to check
		}
	}
	if !l.need(secStrs, 0, len(l.b[secStrs])) {
		return nil, nil, errors.New("interned strings do not match their digest")
	}
	var parsed bool
	if l.strs, parsed = parseStrs(l.b[secStrs]); !parsed || len(l.strs) > maxStrs+1 {
		return nil, nil, errors.New("interned strings do not parse")
	}
	ok = true
	return l, h, nil
}

// ownedPrivate checks that fd is of type typ, owned by this user and not
// open to anyone else.
func ownedPrivate(fd int, typ uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	switch {
	case st.Mode&unix.S_IFMT != typ:
		return errors.New("not a regular file or directory as expected")
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("owned by uid %d, not by this user", st.Uid)
	case st.Mode&0o077 != 0:
		return fmt.Errorf("mode %#o is open to other users", st.Mode&0o777)
	}
	return nil
}

// openFile opens name in the directory dfd for reading, refusing a
// symbolic link, and checks it is a private regular file.
func openFile(dfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	if err := ownedPrivate(fd, unix.S_IFREG); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

func readAt(dfd int, name string, limit int64) ([]byte, error) {
	f, err := openFile(dfd, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = errors.New("too large")
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}

// mapAt maps name, which must be n bytes long, read-only.
func mapAt(dfd int, name string, n int64) ([]byte, error) {
	f, err := openFile(dfd, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() != n {
		return nil, fmt.Errorf("%s: %d bytes, header says %d", name, fi.Size(), n)
	}
	if n == 0 {
		return nil, nil
	}
	b, err := mmap(int(f.Fd()), 0, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", name, err)
	}
	return b, nil
}
