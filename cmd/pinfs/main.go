// Command pinfs pins dataset snapshots into immutable manifests, checks
// them, and serves them read-only through FUSE. Run `pinfs --help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/store"
)

// Exit codes, the same for every command.
const (
	exitOK      = 0 // success
	exitFailed  = 1 // a check failed, input was invalid or tampered, storage failed
	exitUsage   = 2 // bad flags or arguments, no --store, a snapshot that is not a digest: from every command
	exitHelpMsg = `Exit status:
  0  success
  1  failure: a check failed, a manifest or member table is invalid or
     tampered with, an object or version is missing, storage failed
  2  usage error: unknown flag, missing or extra argument, no --store
     (nor $PINFS_STORE), a snapshot name that is not a full
     sha256:<64 hex> digest
`
)

// usageError marks errors in how pinfs was called (exit 2).
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// errCheckFailed is returned by commands that already printed why a check
// failed (exit 1, nothing more to print).
var errCheckFailed = errors.New("check failed")

// command is one pinfs subcommand.
type command struct {
	name  string
	args  string // synopsis after the name
	short string // one line for the command list
	long  string // what it does, for --help
	// setup defines the command's flags on fs and returns the function
	// that runs it with the positional arguments.
	setup func(fs *pflag.FlagSet, out io.Writer) func(ctx context.Context, args []string) error
	// subs, when set, makes this a group (`pinfs alias set …`): the next
	// argument names one of subs. A group with its own setup (`pinfs
	// derive … -- CMD` and `pinfs derive log`) runs itself unless the next
	// argument names one of subs.
	subs []*command
}

var commands = []*command{pinCmd, listCmd, verifyCmd, lsCmd, diffCmd, logCmd, mountCmd, warmCmd, serveCmd, unmountCmd, validateCmd, keyCmd, approveCmd, statusCmd, aliasCmd, resolveCmd, fenceCmd, admitCmd, runCmd, deriveCmd, versionCmd}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one pinfs command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) > 1 && args[0] == "help" { // pinfs help CMD [SUB]: pinfs CMD [SUB] --help
			return run(ctx, append(slices.Clone(args[1:]), "--help"), stdout, stderr)
		}
		topUsage(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] == "--version" {
		args = append([]string{"version"}, args[1:]...)
	}
	cmd := find(commands, args[0])
	if cmd == nil {
		fmt.Fprintf(stderr, "pinfs: unknown command %q (see pinfs --help)\n", args[0])
		return exitUsage
	}
	if cmd.subs != nil && (cmd.setup == nil || len(args) > 1 && find(cmd.subs, args[1]) != nil) {
		group := cmd
		if len(args) < 2 {
			fmt.Fprintf(stderr, "pinfs %s: want a command: %s (see pinfs %s --help)\n", group.name, names(group.subs), group.name)
			return exitUsage
		}
		if args[1] == "-h" || args[1] == "--help" || args[1] == "help" {
			groupUsage(stdout, group)
			return exitOK
		}
		if cmd = find(group.subs, args[1]); cmd == nil {
			fmt.Fprintf(stderr, "pinfs %s: unknown command %q (see pinfs %s --help)\n", group.name, args[1], group.name)
			return exitUsage
		}
		sub := *cmd
		sub.name = group.name + " " + cmd.name
		cmd, args = &sub, args[1:]
	}
	fs := pflag.NewFlagSet("pinfs "+cmd.name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	runCmd := cmd.setup(fs, stdout)
	logFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: pinfs %s %s\n\n%s\nFlags:\n%s\n", cmd.name, cmd.args,
			strings.TrimSpace(cmd.long)+"\n", flagUsages(fs))
		if len(cmd.subs) > 0 {
			fmt.Fprintf(stdout, "Commands:\n")
			for _, c := range cmd.subs {
				fmt.Fprintf(stdout, "  %-9s %s (pinfs %s %s --help)\n", c.name, c.short, cmd.name, c.name)
			}
			fmt.Fprintln(stdout)
		}
		fmt.Fprint(stdout, exitHelpMsg)
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "pinfs %s: %v (see pinfs %s --help)\n", cmd.name, err, cmd.name)
		return exitUsage
	}
	l, err := newLogger(fs, stderr, cmd.name)
	if err != nil {
		fmt.Fprintf(stderr, "pinfs %s: %v\n", cmd.name, err)
		return exitUsage
	}
	slog.SetDefault(l) // library code that logs through slog.Default follows the format
	ctx = withLogger(ctx, l)
	err = runCmd(ctx, fs.Args())
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "pinfs %s: %v\n", cmd.name, ue.error)
		return exitUsage
	case errors.Is(err, errCheckFailed):
		return exitFailed
	default:
		logFrom(ctx).Debug("error detail", "err", store.Detail(err)) // the SDK error that the one line leaves out (--debug)
		fmt.Fprintf(stderr, "pinfs %s: %s\n", cmd.name, oneLine(err))
		return exitFailed
	}
}

// find returns the command called name in cs, or nil.
func find(cs []*command, name string) *command {
	for _, c := range cs {
		if c.name == name {
			return c
		}
	}
	return nil
}

// names lists the names of cs, "a, b or c".
func names(cs []*command) string {
	ns := make([]string, len(cs))
	for i, c := range cs {
		ns[i] = c.name
	}
	return join(ns, "or")
}

// join lists ss as "a, b and c" (with word "and").
func join(ss []string, word string) string {
	if len(ss) < 2 {
		return strings.Join(ss, "")
	}
	return strings.Join(ss[:len(ss)-1], ", ") + " " + word + " " + ss[len(ss)-1]
}

// groupUsage lists the commands of a group such as `pinfs alias`.
func groupUsage(w io.Writer, group *command) {
	fmt.Fprintf(w, "Usage: pinfs %s COMMAND [ARGS] [FLAGS]\n\n%s\nCommands:\n", group.name, strings.TrimSpace(group.long)+"\n")
	for _, c := range group.subs {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.short)
	}
	fmt.Fprintf(w, "\nRun 'pinfs %s COMMAND --help' for a command's flags.\n", group.name)
}

// oneLine keeps error output to one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// topUsage is pinfs --help: every command and sub-command, and which of
// them take --store.
func topUsage(w io.Writer) {
	fmt.Fprint(w, `pinfs serves pinned dataset snapshots: immutable manifests, addressed by
digest, whose members are exact object versions verified with BLAKE3.

Usage: pinfs COMMAND [ARGS] [FLAGS]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-15s %s\n", c.name, c.short)
		for _, s := range c.subs {
			fmt.Fprintf(w, "  %-15s %s\n", c.name+" "+s.name, s.short)
		}
	}
	none, recorded := storeUse()
	storeText := "--store s3://BUCKET/PREFIX or --store DIR (default: $PINFS_STORE) names the store. " +
		"Every command takes it except " + join(none, "and") + "; pinfs status MOUNTPOINT ignores it"
	if len(recorded) > 0 {
		storeText += ", and " + join(recorded, "and") + " default to the store the run's mount recorded"
	}
	storeText += ". S3 uses the AWS SDK's usual configuration: the credential chain, AWS_REGION, " +
		"AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL."
	fmt.Fprintf(w, "\n%s\nRun 'pinfs COMMAND --help' for a command's flags, 'pinfs version' for the build.\n\n%s",
		strings.Join(wrapWords(storeText, 76), "\n"), exitHelpMsg)
}

// storeUse names the commands and sub-commands that take no --store, and
// those whose --store defaults to the store a run's mount recorded (as
// their flag's usage says).
func storeUse() (none, recorded []string) {
	var walk func(prefix string, cs []*command)
	walk = func(prefix string, cs []*command) {
		for _, c := range cs {
			if c.setup != nil {
				fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
				c.setup(fs, io.Discard)
				switch f := fs.Lookup("store"); {
				case f == nil:
					none = append(none, prefix+c.name)
				case strings.Contains(f.Usage, "the store the run's mount recorded"):
					recorded = append(recorded, prefix+c.name)
				}
			}
			walk(prefix+c.name+" ", c.subs)
		}
	}
	walk("", commands)
	return none, recorded
}

// storeFlag defines --store on fs.
func storeFlag(fs *pflag.FlagSet) *string {
	return fs.String("store", os.Getenv("PINFS_STORE"), "`STORE`: s3://bucket/prefix or a local directory (default $PINFS_STORE)")
}
