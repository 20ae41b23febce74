package derive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/derivations"
	"github.com/pinfs/pinfs/verify"
	record "github.com/pinfs/pinfs/verify/derive"
)

// ErrNoCommand is wrapped by ParseTarget's refusal of a key or output
// digest given without the command to run: the store's record would name
// it, and anyone who can write the store can add a valid record.
var ErrNoCommand = errors.New("a key or output digest alone would run the command the store's record names")

// CommandError is a --check refused because the command the caller gave
// after -- is not the record's: nothing was run.
type CommandError struct {
	Record   string   // the record: "record sha256:…" or "record file PATH"
	Given    []string // after --
	Recorded []string // the record's command
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("--check: the command after -- %s is not the command of %s, %s: nothing was run",
		quoteCommand(e.Given), e.Record, quoteCommand(e.Recorded))
}

// Target is what `pinfs derive --check` reruns, given by the caller: a
// record file from the caller's own checkout, whose command it is, or a
// key or output digest with the command the caller gives after --. Only
// ParseTarget makes one, so that the command that runs never comes from
// the store.
type Target struct {
	digest  verify.Digest  // a key or output digest; "" for a record file
	file    *record.Record // the record file's record
	command []string       // the command that may run
}

// ParseTarget checks `pinfs derive --check TARGET [-- COMMAND]` before
// anything is opened or run. A full digest needs the command (else an
// error wrapping ErrNoCommand); anything else is the path of a record
// file, which must Parse, and whose command COMMAND, when given, must
// equal (else a *CommandError). A target that starts with "sha256:" but
// is neither a full digest nor a file is refused with an error wrapping
// verify.ErrNotDigest.
func ParseTarget(target string, command []string) (*Target, error) {
	d, derr := verify.ParseDigest(target)
	if derr == nil {
		if len(command) == 0 {
			return nil, fmt.Errorf("--check %s: %w; pass the record file from your checkout (--check slice.json, as derive --record wrote it) or the command after -- (--check DIGEST -- CMD ARGS…)", d, ErrNoCommand)
		}
		return &Target{digest: d, command: slices.Clone(command)}, nil
	}
	r, err := readRecordFile(target, derr)
	if err != nil {
		return nil, err
	}
	if len(command) > 0 && !slices.Equal(command, r.Command) {
		return nil, &CommandError{Record: "record file " + verify.Printable(target), Given: command, Recorded: r.Command}
	}
	return &Target{file: r, command: r.Command}, nil
}

// Records returns the records to rerun, each of them with the target's
// command. A record file is its own record: the store is not asked. A
// digest is looked up as a key first, then as an output digest (every
// record of that output; none is derivations.ErrNoRecord); skipped are
// the store's records of that output whose command is another, which are
// not run. When no record has the command, that is a *CommandError.
func (t *Target) Records(ctx context.Context, st store.Blobs) (rs, skipped []*record.Record, err error) {
	if t.file != nil {
		return []*record.Record{t.file}, nil, nil
	}
	all, err := derivations.Find(ctx, st, t.digest)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range all {
		if slices.Equal(r.Command, t.command) {
			rs = append(rs, r)
		} else {
			skipped = append(skipped, r)
		}
	}
	if len(rs) == 0 {
		return nil, nil, &CommandError{Record: "record " + string(all[0].Key), Given: t.command, Recorded: all[0].Command}
	}
	return rs, skipped, nil
}

// FromStore reports whether the records Records returns are the store's
// (a key or output digest), whose inputs and params are claims of
// whoever wrote the store: the caller should be shown them (Describe).
func (t *Target) FromStore() bool { return t.file == nil }

// Describe is one line naming what a store's record r makes the caller's
// command run on: its transform, inputs and params, each quoted and cut
// as a command is.
func Describe(r *record.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "derivation %s from the store: transform %q, inputs", r.Key, r.Transform)
	for _, in := range r.Inputs {
		fmt.Fprintf(&b, " %q=%s", in.Name, in.Digest)
	}
	b.WriteString(", params")
	if len(r.Params) == 0 {
		b.WriteString(" none")
	}
	for _, k := range slices.Sorted(maps.Keys(r.Params)) {
		fmt.Fprintf(&b, " %q=%q", k, r.Params[k])
	}
	return cut(b.String(), 4*maxQuoted)
}

// maxQuoted bounds a command line quoted in an error, since a record's
// command can be 64 KiB.
const maxQuoted = 200

// quoteCommand quotes a command line for one line of an error: each
// argument Go-quoted, at most maxQuoted bytes.
func quoteCommand(c []string) string { return cut(fmt.Sprintf("%q", c), maxQuoted) }

// cut returns s, or its first n bytes and "…" when it is longer, without
// the part of a rune the cut leaves.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// readRecordFile reads and parses the record file path. derr is why path
// is not a digest, returned when path is missing and looks like one. The
// file is the user's (store.ReadUserFile): read through a symbolic link,
// but a FIFO or anything else that is not a regular file, or a file larger
// than a record and its newline, is refused before it is read.
func readRecordFile(path string, derr error) (*record.Record, error) {
	b, err := store.ReadUserFile(path, record.MaxSize+1) // +1: the newline --record ends it with
	if errors.Is(err, os.ErrNotExist) && strings.HasPrefix(path, "sha256:") {
		return nil, derr
	}
	if errors.Is(err, store.ErrTooLarge) {
		return nil, fmt.Errorf("record file %s: %w", verify.Printable(path), store.TooLarge("", record.MaxSize))
	}
	if err != nil {
		return nil, fmt.Errorf("record file: %w", err) // it names path
	}
	b = bytes.TrimSuffix(b, []byte("\n")) // as --record writes it
	r, err := record.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("record file %s: %w", verify.Printable(path), err)
	}
	return r, nil
}
