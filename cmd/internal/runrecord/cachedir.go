package runrecord

import "path/filepath"

// DefaultURL returns the run record that pinfs mount, admit, derive and
// run use when --run-record is not given: the local file runs.jsonl in
// cacheDir, the cache dir of this host's mounts. It is one function so
// that a run admitted without --run-record is found by a mount without it.
func DefaultURL(cacheDir string) string { return filepath.Join(cacheDir, "runs.jsonl") }

// SpoolDirOf returns the spool directory (Options.SpoolDir,
// Source.SpoolDir) of the mounts whose cache dir is cacheDir.
func SpoolDirOf(cacheDir string) string { return filepath.Join(cacheDir, "spool") }
