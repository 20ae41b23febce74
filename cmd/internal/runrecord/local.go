package runrecord

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pinfs/pinfs/verify"
)

// localSink appends events to a JSON Lines file that may hold several runs.
type localSink struct {
	lf lockedFile
}

// openLocal opens the record file o.URL, creating it if needed, and binds
// or resumes runID: under the file's lock it reads the run's binding (its
// earlier events), and appends the line that first(kind) returns, with
// kind RunStart (a new run, or the first mount of an admitted one) or
// Resume. If the run is bound to another digest than o.Digest it fails
// with ErrDigestChanged, and with o.RequirePermit if the run holds no
// permit for o.Digest (or, with o.Permit, not exactly that one) it fails
// with ErrNotPermitted; then it writes nothing. It returns the run's
// permit, nil if it has none.
func openLocal(o Options, runID string, first func(kind string) ([]byte, error)) (_ *localSink, _ *Permit, err error) {
	p := o.URL
	f, err := openRecordFile(p)
	if err != nil {
		return nil, nil, err
	}
	s := &localSink{lf: lockedFile{f: f}}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if err := s.lf.lock(); err != nil {
		return nil, nil, err
	}
	defer s.lf.unlock()
	b, err := readBinding(f, runID)
	if err != nil {
		return nil, nil, fmt.Errorf("runrecord: read %s: %w", p, err)
	}
	if o.RequirePermit {
		if err := checkPermit(runID, b.Permit, o.Digest, o.Permit, p); err != nil {
			return nil, nil, err
		}
	}
	if b.found && b.Digest != o.Digest {
		return nil, nil, digestChanged(runID, b.Digest, o.Digest, p)
	}
	kind := RunStart
	if b.started {
		kind = Resume
	}
	line, err := first(kind)
	if err != nil {
		return nil, nil, err
	}
	if err := appendLine(f, line); err != nil {
		return nil, nil, fmt.Errorf("runrecord: append to %s: %w", p, err)
	}
	return s, b.Permit, nil
}

// openRecordFile opens the local record file p for appending and reading,
// creating it and its directory if needed.
func openRecordFile(p string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, fmt.Errorf("runrecord: %w", err)
	}
	f, err := openAppend(p)
	if err != nil {
		return nil, fmt.Errorf("runrecord: %w", err)
	}
	return f, nil
}

// localBound is what a record file says about a run before it is opened.
type localBound struct {
	found   bool          // the run has events
	Digest  verify.Digest // the digest of its first event
	Permit  *Permit       // the permit, if its first event is one
	started bool          // a mount opened it (run_start or resume)
}

// readBinding reads the binding of runID from f: the digest of the run's
// first event, and its permit when that event is a permit (Admit). Lines
// that do not parse (a line cut short by a crash) are skipped; lines that
// do not mention runID are not decoded.
func readBinding(f *os.File, runID string) (localBound, error) {
	var b localBound
	fi, err := f.Stat()
	if err != nil {
		return b, err
	}
	// The fields read come before a line's payload: cut it off.
	sc := newLineScanner(io.NewSectionReader(f, 0, fi.Size()))
	quoted := []byte(`"` + runID + `"`)
	for {
		line, _, err := sc.next(true)
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if bytes.Contains(line, quoted) {
			var e struct {
				RunID  string        `json:"run_id"`
				Digest verify.Digest `json:"digest"`
				Event  string        `json:"event"`
				Permit *Permit       `json:"permit"`
			}
			if json.Unmarshal(line, &e) == nil && e.RunID == runID {
				if !b.found {
					b.found, b.Digest = true, e.Digest
					if e.Event == PermitEvent {
						b.Permit = e.Permit
					}
				}
				if e.Event != PermitEvent {
					b.started = true
					return b, nil
				}
			}
		}
	}
}

// emit appends line and fsyncs the file.
func (s *localSink) emit(_ context.Context, _ *Event, line []byte) error {
	if err := s.lf.lock(); err != nil {
		return err
	}
	defer s.lf.unlock()
	if err := appendLine(s.lf.f, line); err != nil {
		return fmt.Errorf("runrecord: append to %s: %w", s.lf.f.Name(), err)
	}
	return nil
}

// close closes the file; every line is already synced.
func (s *localSink) close(context.Context) error {
	return s.lf.f.Close()
}
