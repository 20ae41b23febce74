package verify

import "golang.org/x/sys/unix"

// Close unmaps the sections of a table mapped from an index (a table
// built in memory has nothing to unmap and is left to the collector).
// Every string the table returned is invalid afterwards, and so is any
// further use of the table: the caller closes it only once no one reads
// it. Close is idempotent.
func (t *Table) Close() error {
	t.repairMu.Lock()
	defer t.repairMu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	var first error
	for _, l := range append(t.old, t.cur.Load()) {
		if err := l.unmap(); err != nil && first == nil {
			first = err
		}
	}
	t.old = nil
	// A use after Close dereferences nil, a panic, rather than reading
	// memory that is no longer mapped, a fault that kills the process.
	t.cur.Store(nil)
	return first
}

// Mapped reports whether the table's sections are mapped from an index
// file (and so hold mappings of the process until Close).
func (t *Table) Mapped() bool {
	l := t.cur.Load()
	return l != nil && len(l.maps) > 0
}

// unmap unmaps the sections of l that were mapped. l must not be read
// afterwards.
func (l *layout) unmap() error {
	if l == nil {
		return nil
	}
	var first error
	for _, b := range l.maps {
		if err := munmap(b); err != nil && first == nil {
			first = err
		}
	}
	l.maps = nil
	return first
}

// mmap and munmap map index files; tests replace them to inject the
// errors a process meets when it runs out of mappings, memory or files.
var (
	mmap   = unix.Mmap
	munmap = unix.Munmap
)
