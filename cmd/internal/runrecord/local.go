package runrecord

import (
	"bufio"
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

// openLocal opens the record file p, creating it if needed, and binds or
// resumes runID: under the file's lock it looks for the run's earlier
// events, and appends the line that first(kind) returns, with kind RunStart
// or Resume. If the run is bound to another digest it fails with
// ErrDigestChanged and writes nothing.
func openLocal(p, runID string, digest verify.Digest, first func(kind string) ([]byte, error)) (_ *localSink, err error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, fmt.Errorf("runrecord: %w", err)
	}
	f, err := openAppend(p)
	if err != nil {
		return nil, fmt.Errorf("runrecord: %w", err)
	}
	s := &localSink{lf: lockedFile{f: f}}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if err := s.lf.lock(); err != nil {
		return nil, err
	}
	defer s.lf.unlock()
	bound, err := boundDigest(f, runID)
	if err != nil {
		return nil, fmt.Errorf("runrecord: read %s: %w", p, err)
	}
	kind := RunStart
	if bound != "" {
		if bound != digest {
			return nil, digestChanged(runID, bound, digest, p)
		}
		kind = Resume
	}
	line, err := first(kind)
	if err != nil {
		return nil, err
	}
	if err := appendLine(f, line); err != nil {
		return nil, fmt.Errorf("runrecord: append to %s: %w", p, err)
	}
	return s, nil
}

// boundDigest returns the digest of the first event of runID in f, or ""
// if the run has none. Lines that do not parse (a line cut short by a
// crash) are skipped; lines that do not mention runID are not decoded.
func boundDigest(f *os.File, runID string) (verify.Digest, error) {
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, fi.Size()), 64<<10)
	quoted := []byte(`"` + runID + `"`)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && bytes.Contains(line, quoted) {
			var e struct {
				RunID  string        `json:"run_id"`
				Digest verify.Digest `json:"digest"`
			}
			if json.Unmarshal(line, &e) == nil && e.RunID == runID {
				return e.Digest, nil
			}
		}
		if err == io.EOF {
			return "", nil
		}
		if err != nil {
			return "", err
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
