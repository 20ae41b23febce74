package derive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/pin"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	record "github.com/pinfs/pinfs/verify/derive"
)

// killDelay is how long a command has to exit after SIGTERM before it is
// killed. It is a variable only so that tests can shorten it.
var killDelay = 10 * time.Second

// Runner runs derivations: it mounts a record's inputs read-only, runs its
// command over them, and pins what the command wrote.
type Runner struct {
	Store     store.Store
	CacheDir  string // the mounts' cache dir, already prepared (mount.PrepareCacheDir)
	RunRecord string // the run record the input mounts write to
	WorkDir   string // where the scratch dir is made; "" is os.TempDir()
	Output    io.Writer
	Log       *slog.Logger
	// PassEnv names the variables that may carry credentials (Credential)
	// and are passed to the command all the same (--pass-env).
	PassEnv []string

	// MountTimeout bounds the wait for the inputs to serve (default 2
	// minutes); CacheMem and CacheDisk are each mount's block cache
	// budgets (defaults 128 MiB and 10 GiB).
	MountTimeout        time.Duration
	CacheMem, CacheDisk int64

	// mount, in tests, stands in for mounting the inputs (FUSE): it makes
	// dir/<name> for each input and returns what undoes that.
	mount func(ctx context.Context, inputs []record.Input, dir string) (unmount func(), err error)
}

// Run runs r's derivation in a fresh scratch dir, pinfs-derive-* under
// WorkDir: each input is mounted read-only at <work>/inputs/<name>, the
// command writes into the empty <work>/output, and that is pinned with
// the inputs as parents and r's transform and split rule. It returns the
// output's digest. The scratch dir is removed at the end, also on
// failure; a command that fails pins nothing.
func (rn *Runner) Run(ctx context.Context, r *record.Record) (verify.Digest, error) {
	split, err := pin.ParseSplitRule(r.Split)
	if err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(rn.WorkDir, "pinfs-derive-*")
	if err != nil {
		return "", fmt.Errorf("work dir: %w", err)
	}
	inputs, output := filepath.Join(work, "inputs"), filepath.Join(work, "output")
	defer rn.removeWork(work, r.Inputs)
	if err := os.Mkdir(inputs, 0o755); err != nil {
		return "", fmt.Errorf("work dir: %w", err)
	}
	if err := os.Mkdir(output, 0o755); err != nil {
		return "", fmt.Errorf("work dir: %w", err)
	}
	mountAll := rn.mountAll
	if rn.mount != nil {
		mountAll = rn.mount
	}
	unmount, err := mountAll(ctx, r.Inputs, inputs)
	if err != nil {
		return "", err
	}
	err = rn.exec(ctx, r, inputs, output)
	unmount()
	if err != nil {
		return "", err
	}
	if err := someFile(output); err != nil {
		return "", err
	}
	p := &pin.Pinner{Store: rn.Store, Options: pin.Options{Parents: Parents(r), Transform: r.Transform, Split: split}}
	d, err := p.Dir(ctx, output)
	if err != nil {
		return "", fmt.Errorf("pin PINFS_OUTPUT: %w", err)
	}
	return d, nil
}

// exec runs r's command with its environment and waits for it. Its output
// goes to rn.Output. It runs in a process group of its own: when ctx ends
// the group gets SIGTERM, and SIGKILL killDelay later; once the command
// has exited, whatever it left running in its group is killed, so nothing
// writes to the output while it is pinned.
func (rn *Runner) exec(ctx context.Context, r *record.Record, inputs, output string) error {
	cmd := exec.CommandContext(ctx, r.Command[0], r.Command[1:]...)
	cmd.Env = Env(os.Environ(), rn.PassEnv, r, inputs, output)
	cmd.Stdout, cmd.Stderr = rn.Output, rn.Output
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = killDelay
	err := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftovers; ESRCH when there are none
	}
	name := verify.Printable(r.Command[0])
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("CMD (%s) stopped: %w", name, context.Cause(ctx))
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Errorf("CMD was killed by signal %d (%v) (%s)", int(ws.Signal()), ws.Signal(), name)
		}
		return fmt.Errorf("CMD exited with status %d (%s)", ee.ExitCode(), name)
	case err != nil:
		return fmt.Errorf("CMD: %w", err)
	}
	return nil
}

// errNoFiles stops the walk of someFile at the first file.
var errNoFiles = errors.New("found")

// someFile returns nil when there is at least one file (of any type)
// under dir, and an error saying the command wrote none otherwise.
func someFile(dir string) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return errNoFiles
		}
		return nil
	})
	switch {
	case errors.Is(err, errNoFiles):
		return nil
	case err != nil:
		return fmt.Errorf("PINFS_OUTPUT: %w", err)
	}
	return errors.New("CMD wrote no files to PINFS_OUTPUT")
}

// removeWork removes the scratch dir work. It never recurses into an input
// mountpoint: those are removed with rmdir, which fails on a mount that is
// still there rather than walk into it; a dir left behind is logged.
func (rn *Runner) removeWork(work string, inputs []record.Input) {
	errs := []error{os.RemoveAll(filepath.Join(work, "output"))}
	for _, in := range inputs {
		if err := os.Remove(filepath.Join(work, "inputs", in.Name)); !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(filepath.Join(work, "inputs")); !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	errs = append(errs, os.Remove(work))
	if err := errors.Join(errs...); err != nil {
		rn.Log.Warn("scratch dir left behind", "dir", work, "err", err)
	}
}
