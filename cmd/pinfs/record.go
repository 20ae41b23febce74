package main

import "github.com/pinfs/pinfs/cmd/internal/runrecord"

// recordHelp is the help of every --run-record flag.
const recordHelp = "run record `URL`: a local JSON Lines file or s3://bucket/prefix (default <cache-dir>/runs.jsonl)"

// recordURL returns the run record a command uses: record when given,
// else the cache dir's (runrecord.DefaultURL), the same for mount, admit,
// derive and pinfs run. With neither it is a usage error.
func recordURL(record, cacheDir string) (string, error) {
	switch {
	case record != "":
		return record, nil
	case cacheDir == "":
		return "", usagef("--run-record is required: there is no default cache dir ($XDG_CACHE_HOME and $HOME are unset); pass --run-record URL or --cache-dir DIR")
	}
	return runrecord.DefaultURL(cacheDir), nil
}

// spoolOf is the spool of cache dir cacheDir, "" for none.
func spoolOf(cacheDir string) string {
	if cacheDir == "" {
		return ""
	}
	return runrecord.SpoolDirOf(cacheDir)
}
