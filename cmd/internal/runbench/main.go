// Command runbench writes synthetic run records for `make bench`
// (integration/bench, issue 9 "Scale"), which cannot import
// cmd/internal: the record of a run that read every member of a snapshot,
// or of many small runs, written with runrecord and consumed.Tracker as a
// mount writes them, without mounting. It appends to the record file and
// prints what it wrote as one JSON object (see recordStats).
//
//	runbench full  --record FILE --store STORE --digest D [--run-id ID] [--deltas 60]
//	runbench small --record FILE --store STORE --digest D [--run-id PREFIX] [--runs 300] [--members 10000] [--jobs 8]
//
// Exit status: 0 written, 1 failed, 2 usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/pinfs/pinfs/store/dial"
	"github.com/pinfs/pinfs/verify"
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	var u usageError
	switch {
	case err == nil:
	case errors.As(err, &u):
		fmt.Fprintln(os.Stderr, "runbench:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "runbench:", err)
		os.Exit(1)
	}
}

// usageError is a bad command line.
type usageError struct{ error }

// run is runbench with args (the mode first), printing its stats to out.
func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) == 0 || (args[0] != "full" && args[0] != "small") {
		return usageError{errors.New("want a mode: full or small")}
	}
	mode := args[0]
	fs := flag.NewFlagSet("runbench "+mode, flag.ContinueOnError)
	fs.SetOutput(errOut)
	record := fs.String("record", "", "run record `FILE` (JSON Lines) to append to")
	storeURL := fs.String("store", "", "store `URL` that holds the snapshot")
	digest := fs.String("digest", "", "the snapshot's manifest `DIGEST`")
	runID := fs.String("run-id", "bench-1m-all", "run `ID` (full) or run id prefix (small)")
	deltas := fs.Int("deltas", 60, "consumed events of the full run (flushes)")
	runs := fs.Int("runs", 300, "small runs")
	members := fs.Int("members", 10_000, "members each small run reads")
	jobs := fs.Int("jobs", 8, "small runs written at once")
	seed := fs.Uint64("seed", 9, "seed of the shuffles")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{err}
	}
	if *record == "" || *storeURL == "" || fs.NArg() != 0 {
		return usageError{errors.New("want --record, --store and --digest, and no arguments")}
	}
	if *deltas < 1 || *runs < 0 || *members < 1 || *jobs < 1 {
		return usageError{errors.New("--deltas, --members and --jobs must be positive, --runs not negative")}
	}
	d, err := verify.ParseDigest(*digest)
	if err != nil {
		return usageError{err}
	}
	st, err := dial.Open(ctx, *storeURL)
	if err != nil {
		return err
	}
	snap, err := verify.Load(ctx, st, d)
	if err != nil {
		return err
	}
	w := &writer{path: *record, store: *storeURL, digest: d, tab: snap.Table(),
		st: recordStats{Integrity: map[string]int64{}}}
	t0 := time.Now()
	if mode == "full" {
		err = w.full(ctx, *runID, *deltas, *seed)
	} else {
		err = w.small(ctx, *runID, *runs, *members, *jobs, *seed)
	}
	if err != nil {
		return err
	}
	w.st.Seconds = time.Since(t0).Seconds()
	return json.NewEncoder(out).Encode(w.st)
}
