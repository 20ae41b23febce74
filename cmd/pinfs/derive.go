package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/derive"
	"github.com/pinfs/pinfs/cmd/internal/lineage"
	"github.com/pinfs/pinfs/cmd/internal/mount"
	"github.com/pinfs/pinfs/cmd/internal/pin"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/derivations"
	"github.com/pinfs/pinfs/verify"
	record "github.com/pinfs/pinfs/verify/derive"
)

var deriveCmd = &command{
	name:  "derive",
	args:  "--input NAME=DIGEST… --transform VERSION [--param KEY=VALUE…] --store STORE -- CMD [ARGS…] | --check RECORD-FILE [-- CMD [ARGS…]] | --check KEY|OUTPUT-DIGEST -- CMD [ARGS…]",
	short: "run a versioned transform over pinned inputs and pin its output, with a record",
	long: `Run CMD over snapshots pinned by digest and pin what it writes, with a
derivation record: the inputs, the transform VERSION, the params, the
command line, the split rule and the output digest (docs/derive.md).

Each --input NAME=DIGEST is mounted read-only, in this process, and its
mountpoint passed to CMD as $PINFS_INPUT_<NAME>, also in upper case
($PINFS_INPUT_raw and $PINFS_INPUT_RAW for raw). Inputs are digests only: an alias, "latest", a prefix or a
path is refused with exit status 2. CMD gets an empty directory,
$PINFS_OUTPUT, and $PINFS_PARAM_<KEY> for each --param, $PINFS_TRANSFORM
and $PINFS_DERIVATION_KEY. Its stdout and stderr go to stderr. When it
exits 0 the output is pinned (as pinfs pin DIR does) with the inputs as
parents and VERSION as transform, the record is saved in the store, and
the output digest is printed as the last line of stdout.

VERSION names the code: harvest@v1.4.2, registry/img@sha256:<hex>,
repo@<commit>. The derivation key is the SHA-256 of the record without
output and time. A key whose output is in the store is not run again: the
cached digest is printed. --force reruns it, and fails like --check when
the bytes differ; the record is never replaced.

CMD gets the environment of pinfs without any AWS_* variable (keys,
session token, profile, config and credential files, web identity, role,
container credentials), so that the store's credentials are not handed
to it; --pass-env NAME (repeatable) passes one anyway. pinfs itself keeps
them to read the store. This is not a sandbox: a transform that goes
looking (~/.aws, the instance metadata service) can still find some.

--check RECORD-FILE reruns the derivation of a record file from your
checkout (the one --record wrote, committed next to the code) into a
scratch dir and compares the output with the recorded one: exit 0 when it
is the same, exit 1 naming the transform version and the members changed,
added and removed when not. It proves that this version is deterministic
on these inputs, not that it is correct. Only a command you give runs:
the record file's, or CMD after --. A KEY or OUTPUT-DIGEST takes the
record from the store, where anyone who can write it can add a valid
record, so it needs -- CMD [ARGS…] and is refused without it (exit 2).
CMD after --, with a record file or a digest, must be the record's
command: another is refused (exit 1) and nothing runs. Of the records of
an output digest, those with another command are skipped.

SIGINT or SIGTERM stops CMD (SIGTERM, SIGKILL 10 s later), unmounts the
inputs and exits 1.`,
	subs: []*command{deriveLogCmd},
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		inputs := fs.StringArray("input", nil, "`NAME=DIGEST` of an input snapshot, a full sha256:<64 hex> digest (repeatable)")
		transform := fs.String("transform", "", "`VERSION` of the code that derives the output: NAME@VERSION, e.g. harvest@v1.4.2 or registry/img@sha256:<64 hex>")
		params := fs.StringArray("param", nil, "`KEY=VALUE` parameter of the transform, passed as $PINFS_PARAM_<KEY> (repeatable)")
		split := fs.String("split", "dir", "split `RULE` of the output, as on pinfs pin: dir, dir:NAME,NAME... or none")
		storeURL := storeFlag(fs)
		cacheDir := fs.String("cache-dir", defaultCacheDir(), "`DIR` for the input mounts' block cache, verified metadata and spool, as on pinfs mount")
		runRecord := fs.String("run-record", "", "run record `URL` of the input mounts: a local JSON Lines file or s3://bucket/prefix (default <cache-dir>/runs.jsonl)")
		workDir := fs.String("work-dir", "", "`DIR` in which the scratch dir (inputs, output) is made (default the system temp dir)")
		recordFile := fs.String("record", "", "write the derivation record, canonical JSON, to `FILE`")
		force := fs.Bool("force", false, "run the derivation even when its output is cached; fail when the output differs")
		check := fs.String("check", "", "rerun the derivation of `RECORD-FILE` (or of KEY|OUTPUT-DIGEST with the command after --) and compare its output with the recorded one")
		passEnv := fs.StringArray("pass-env", nil, "pass the environment variable `NAME` to the command although it may carry storage credentials (AWS_*) (repeatable)")
		return func(ctx context.Context, args []string) error {
			var cmdArgs []string
			switch at := fs.ArgsLenAtDash(); {
			case at > 0 || at < 0 && len(args) > 0:
				return usagef("unexpected argument %s: the command goes after --", verify.Printable(args[0]))
			case at == 0:
				cmdArgs = args
			}
			pass, err := derive.ParsePassEnv(*passEnv)
			if err != nil {
				return usageError{err}
			}
			rf := runnerFlags{cacheDir: *cacheDir, runRecord: *runRecord, workDir: *workDir, pass: pass}
			if fs.Changed("check") {
				for _, f := range []string{"input", "transform", "param", "split", "force", "record"} {
					if fs.Changed(f) {
						return usagef("--check takes no --%s: the record says how to run the derivation", f)
					}
				}
				if *check == "" {
					return usagef("--check needs a RECORD-FILE, or a KEY or OUTPUT-DIGEST and the command after --")
				}
				return deriveCheck(ctx, rf, *storeURL, *check, cmdArgs, out)
			}
			r, err := deriveRecord(*inputs, *transform, *params, *split, cmdArgs, *storeURL)
			if err != nil {
				return err
			}
			st, err := openStore(ctx, *storeURL)
			if err != nil {
				return err
			}
			rn, err := rf.runner(ctx, st)
			if err != nil {
				return err
			}
			res, err := derive.Derive(ctx, rn, r, *force, time.Now())
			if err != nil {
				return err
			}
			rec := res.Record
			switch res.Outcome {
			case derive.Cached:
				fmt.Fprintf(os.Stderr, "derivation %s is cached: output %s, recorded %s (--force reruns it)\n", rec.Key, rec.Output, rec.Time)
			case derive.Reproduced:
				fmt.Fprintf(os.Stderr, "derivation %s reproduced %s, recorded %s\n", rec.Key, rec.Output, rec.Time)
			default:
				fmt.Fprintf(os.Stderr, "derivation %s recorded: output %s\n", rec.Key, rec.Output)
			}
			if *recordFile != "" {
				if err := writeRecord(*recordFile, rec); err != nil {
					return err
				}
			}
			_, err = fmt.Fprintln(out, rec.Output)
			return err
		}
	},
}

// deriveLogCmd is `pinfs derive log`, a sub-command of deriveCmd.
var deriveLogCmd = &command{
	name:  "log",
	args:  "DIGEST|KEY --store STORE [--json]",
	short: "show the derivation records that produced a snapshot, and those of its inputs",
	long: `Print the derivation records that produced DIGEST (an output digest, or
the derivation key of one record) and, depth first, those of each input:
the lineage as far as the store knows it, as a tree indented two spaces
per level. Each record shows its key, transform, time, command, params and
split, then each input as "input NAME: DIGEST" with its own lineage below.
An input that no record produced is "not derived", with the sources its
manifest was pinned from. A digest met again is "shown above"; the walk
stops 32 levels down.

Exit 1 when the store holds no record for DIGEST, when a record is invalid
(tampered with), or when an input's manifest cannot be read (after the
tree is printed); a manifest missing from the store is only noted.
With --json the tree is one JSON document (see docs/derive.md).`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		asJSON := fs.Bool("json", false, "print the lineage as one JSON document")
		return func(ctx context.Context, args []string) error {
			d, st, err := snapshotArg(ctx, args, *storeURL, "exactly one DIGEST or KEY", 0)
			if err != nil {
				return err
			}
			n, err := lineage.Derived(ctx, lineage.StoreRecords(st), d)
			if errors.Is(err, derivations.ErrNoRecord) {
				return fmt.Errorf("no derivation record for %s in store %s", d, *storeURL)
			}
			if err != nil {
				return err
			}
			if *asJSON {
				err = printJSON(out, n)
			} else {
				err = lineage.WriteDerived(out, n)
			}
			if err == nil && n.Unreadable() {
				err = errCheckFailed
			}
			return err
		}
	},
}

// deriveRecord checks the parts of a derivation given on the command line
// and returns its record (without output and time). Every error is a
// usage error: nothing has been mounted or run.
func deriveRecord(inputs []string, transform string, params []string, split string, cmdArgs []string, storeURL string) (*record.Record, error) {
	ins, err := derive.ParseInputs(inputs)
	if errors.Is(err, verify.ErrNotDigest) {
		err = withHint(err, inputsHint(inputs, storeURL))
	}
	if err != nil {
		return nil, usageError{err}
	}
	if transform == "" {
		return nil, usagef("--transform VERSION is required: the version of the code that derives the output, e.g. harvest@v1.4.2")
	}
	if err := record.CheckVersion(transform); err != nil {
		return nil, usagef("--%w", err)
	}
	ps, err := derive.ParseParams(params)
	if err != nil {
		return nil, usageError{err}
	}
	if _, err := pin.ParseSplitRule(split); err != nil {
		return nil, usageError{err}
	}
	if len(cmdArgs) == 0 {
		return nil, usagef("no command: give it after --, e.g. pinfs derive … -- python3 harvest.py")
	}
	r, err := record.New(ins, transform, ps, cmdArgs, split)
	if err != nil {
		return nil, usageError{err}
	}
	return r, nil
}

// runnerFlags are the flags of pinfs derive that make its derive.Runner.
type runnerFlags struct {
	cacheDir, runRecord, workDir string
	pass                         []string // --pass-env
}

// runner prepares the cache dir and returns the runner of derivations
// over st.
func (f runnerFlags) runner(ctx context.Context, st store.Store) (*derive.Runner, error) {
	cacheDir, runRecord := f.cacheDir, f.runRecord
	if cacheDir == "" {
		return nil, errors.New("no default cache dir: $XDG_CACHE_HOME and $HOME are unset; pass --cache-dir DIR (a directory only this user can write)")
	}
	if err := mount.PrepareCacheDir(cacheDir); err != nil {
		return nil, err
	}
	runRecord, err := recordURL(runRecord, cacheDir)
	if err != nil {
		return nil, err
	}
	return &derive.Runner{
		Store: st, CacheDir: cacheDir, RunRecord: runRecord, WorkDir: f.workDir, Output: os.Stderr,
		Log: logFrom(ctx), PassEnv: f.pass,
	}, nil
}

// deriveCheck is `pinfs derive --check TARGET [-- COMMAND]`: it refuses a
// key or digest without a command and a command that is not the record's
// before anything is written or run, then reruns each derivation of
// TARGET with the caller's command and compares its output with the
// recorded one. Each one that differs is reported on stderr; the exit
// status is 1 when one does.
func deriveCheck(ctx context.Context, rf runnerFlags, storeURL, target string, command []string, out io.Writer) error {
	tg, err := derive.ParseTarget(target, command)
	if errors.Is(err, verify.ErrNotDigest) || errors.Is(err, derive.ErrNoCommand) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	st, err := openStore(ctx, storeURL)
	if err != nil {
		return err
	}
	rs, skipped, err := tg.Records(ctx, st)
	if err != nil {
		return err
	}
	if n := len(skipped); n > 0 {
		what := "records"
		if n == 1 {
			what = "record"
		}
		fmt.Fprintf(os.Stderr, "pinfs derive: skipped %d %s of %s whose command is not the one after -- (pinfs derive log %[3]s lists them)\n",
			n, what, target)
	}
	rn, err := rf.runner(ctx, st)
	if err != nil {
		return err
	}
	failed := false
	for _, r := range rs {
		if tg.FromStore() {
			fmt.Fprintf(os.Stderr, "pinfs derive: %s\n", verify.Printable(derive.Describe(r)))
		}
		err := derive.Check(ctx, rn, r)
		if err == nil {
			fmt.Fprintf(out, "derivation %s reproduced %s\n", r.Key, r.Output)
			continue
		}
		if len(rs) == 1 {
			return err
		}
		fmt.Fprintf(os.Stderr, "pinfs derive: derivation %s: %s\n", r.Key, oneLine(err))
		failed = true
		if ctx.Err() != nil {
			break
		}
	}
	if failed {
		return errCheckFailed
	}
	return nil
}

// writeRecord writes r's canonical JSON and a newline to path.
func writeRecord(path string, r *record.Record) error {
	b, err := r.Encode()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--record: %w", err)
	}
	return nil
}
