package runrecord

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

// spool holds the events of one run that could not be delivered to the
// store yet, in <dir>/<run-id>.jsonl: one event line each, exactly the
// bytes of its object. Appends and rewrites take a mutex and an flock on
// <dir>/<run-id>.lock (the spool file itself is replaced by rename, so it
// cannot carry the lock), which orders them between goroutines and between
// processes that share the directory.
type spool struct {
	path string
	lock lockedFile
	bind string // <dir>/<run-id>.run.json, see localBinding

	// pending is how many lines this process last saw in the spool; while
	// it is not zero new events go to the spool, behind the older ones.
	pending atomic.Int64
}

// maxSpool is the most bytes of a spool file read: the events of one run
// that a mount of this host could not deliver (a day of consumed deltas
// of a 1M-member snapshot read at random takes a few tens of MB).
const maxSpool = 1 << 30

// spoolEntry is one spooled event: its store key and its line.
type spoolEntry struct {
	key  string
	line []byte
}

// localBinding records on this host that a run was bound against the
// store at URL; it lets the run resume while the store is unreachable.
// It keeps the run's permit too, so that a resume offline knows it.
type localBinding struct {
	URL    string        `json:"url"`
	RunID  string        `json:"run_id"`
	Digest verify.Digest `json:"digest"`
	Permit *Permit       `json:"permit,omitempty"`
}

// same reports whether b (nil for none) records what o does.
func (b *localBinding) same(o *localBinding) bool {
	return b != nil && reflect.DeepEqual(*b, *o)
}

func openSpool(dir, runID string) (*spool, error) {
	if dir == "" {
		return nil, errors.New("runrecord: a run record in a store needs a spool directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("runrecord: spool: %w", err)
	}
	lf, err := openFile(filepath.Join(dir, runID+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("runrecord: spool: %w", err)
	}
	s := &spool{
		path: filepath.Join(dir, runID+".jsonl"),
		lock: lockedFile{f: lf},
		bind: bindingPath(dir, runID),
	}
	if _, err := s.entries(); err != nil {
		lf.Close()
		return nil, err
	}
	return s, nil
}

// append adds line to the spool and fsyncs it.
func (s *spool) append(line []byte) error {
	if err := s.lock.lock(); err != nil {
		return err
	}
	defer s.lock.unlock()
	f, err := openAppend(s.path)
	if err != nil {
		return fmt.Errorf("runrecord: spool: %w", err)
	}
	err = appendLine(f, line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("runrecord: spool %s: %w", s.path, err)
	}
	s.pending.Add(1)
	return nil
}

// entries returns the spooled events, oldest first.
func (s *spool) entries() ([]spoolEntry, error) {
	if err := s.lock.lock(); err != nil {
		return nil, err
	}
	defer s.lock.unlock()
	es, err := s.read()
	if err != nil {
		return nil, err
	}
	s.pending.Store(int64(len(es)))
	return es, nil
}

// remove drops the delivered events from the spool, by rewriting it
// without them, and returns how many are left. Events spooled since
// entries was called stay.
func (s *spool) remove(delivered map[string]bool) (int, error) {
	if err := s.lock.lock(); err != nil {
		return 0, err
	}
	defer s.lock.unlock()
	es, err := s.read()
	if err != nil {
		return 0, err
	}
	var keep bytes.Buffer
	n := 0
	for _, e := range es {
		if !delivered[e.key] {
			keep.Write(e.line)
			n++
		}
	}
	if n == len(es) {
		s.pending.Store(int64(n))
		return n, nil
	}
	if n == 0 {
		err = os.Remove(s.path)
		if err == nil {
			err = store.SyncDir(filepath.Dir(s.path))
		}
	} else {
		err = writeAtomic(s.path, keep.Bytes())
	}
	if err != nil {
		return 0, fmt.Errorf("runrecord: spool: %w", err)
	}
	s.pending.Store(int64(n))
	return n, nil
}

// read parses the spool file; the caller holds the lock. A line that does
// not end in a newline or does not parse is a write cut short by a crash,
// which Emit never acknowledged: it is skipped, and dropped by the next
// rewrite.
func (s *spool) read() ([]spoolEntry, error) {
	data, err := readFile(s.path, maxSpool)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runrecord: spool: %w", err)
	}
	var es []spoolEntry
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := data[:i+1]
		data = data[i+1:]
		var e Event
		if json.Unmarshal(line, &e) != nil || !known(e.Event) || checkRunID(e.RunID) != nil {
			continue
		}
		es = append(es, spoolEntry{key: eventKey(&e, line), line: line})
	}
	return es, nil
}

// bindingPath is where spool dir dir keeps run runID's local binding.
func bindingPath(dir, runID string) string { return filepath.Join(dir, runID+".run.json") }

// spooledBinding returns the local binding of run runID kept in spool dir
// dir, nil if there is none or no dir. It opens no spool and creates
// nothing.
func spooledBinding(dir, runID string) (*localBinding, error) {
	if dir == "" {
		return nil, nil
	}
	return (&spool{bind: bindingPath(dir, runID)}).binding()
}

// binding returns the run's local binding, or nil if there is none.
func (s *spool) binding() (*localBinding, error) {
	data, err := readFile(s.bind, store.MaxRecord)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runrecord: spool: %w", err)
	}
	var b localBinding
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("runrecord: spool: %s: %w", s.bind, err)
	}
	return &b, nil
}

// setBinding records b durably.
func (s *spool) setBinding(b localBinding) error {
	data, err := json.Marshal(b)
	if err != nil {
		return err
	}
	if err := writeAtomic(s.bind, append(data, '\n')); err != nil {
		return fmt.Errorf("runrecord: spool: %w", err)
	}
	return nil
}

func (s *spool) close() error { return s.lock.f.Close() }
