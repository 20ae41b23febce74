package derive

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/mount"
	record "github.com/pinfs/pinfs/verify/derive"
)

// Defaults of a Runner's knobs.
const (
	defaultMountTimeout = 2 * time.Minute
	defaultCacheMem     = 128 << 20
	defaultCacheDisk    = 10 << 30
	// unmountWait bounds the wait for the mounts to return once told to
	// stop; a mount that has not by then is detached lazily.
	unmountWait = 30 * time.Second
)

// mounts are a derivation's inputs, mounted in-process.
type mounts struct {
	cancel  context.CancelFunc
	done    chan mountEnd // one per mount.Run, when it returns
	running map[string]string
	log     *slog.Logger
}

// mountEnd is how one mount.Run ended.
type mountEnd struct {
	name string
	err  error
}

// mountAll mounts each input read-only at dir/<name> (mount.Run, each in a
// goroutine of its own) and returns once they all serve. It fails, with
// every mount undone, when one fails, when they do not all serve within
// rn.MountTimeout, or when ctx ends. The mounts do not end with ctx:
// the returned unmount ends them, after the command has been stopped.
func (rn *Runner) mountAll(ctx context.Context, inputs []record.Input, dir string) (unmount func(), err error) {
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ms := &mounts{cancel: cancel, done: make(chan mountEnd, len(inputs)), running: map[string]string{}, log: rn.Log}
	ready := make(chan string, len(inputs))
	for _, in := range inputs {
		mp := filepath.Join(dir, in.Name)
		if err := os.Mkdir(mp, 0o755); err != nil {
			ms.close()
			return nil, fmt.Errorf("input %s: %w", in.Name, err)
		}
		c := mount.Config{
			Digest: in.Digest, Mountpoint: mp, Store: rn.Store, CacheDir: rn.CacheDir,
			CacheMem: cmp.Or(rn.CacheMem, defaultCacheMem), CacheDisk: cmp.Or(rn.CacheDisk, defaultCacheDisk),
			RunRecord: rn.RunRecord, UID: uint32(os.Getuid()), GID: uint32(os.Getgid()),
			Log: rn.Log, Out: io.Discard, Ready: func(string) { ready <- in.Name },
		}
		ms.running[in.Name] = mp
		go func() { ms.done <- mountEnd{in.Name, mount.Run(mctx, c)} }()
	}
	timeout := time.NewTimer(cmp.Or(rn.MountTimeout, defaultMountTimeout))
	defer timeout.Stop()
	for serving := 0; serving < len(inputs); {
		select {
		case <-ready:
			serving++
		case end := <-ms.done:
			delete(ms.running, end.name)
			ms.close()
			if end.err == nil {
				return nil, fmt.Errorf("input %s: unmounted before it served", end.name)
			}
			return nil, fmt.Errorf("input %s: %w", end.name, end.err)
		case <-ctx.Done():
			ms.close()
			return nil, fmt.Errorf("mounting the inputs: %w", context.Cause(ctx))
		case <-timeout.C:
			ms.close()
			return nil, fmt.Errorf("inputs not mounted within %v", cmp.Or(rn.MountTimeout, defaultMountTimeout))
		}
	}
	return ms.close, nil
}

// close unmounts the inputs and waits, at most unmountWait, for their
// mount.Run to return (each writes its run_end first). A mount that has
// not returned by then is detached lazily, so that its mountpoint can be
// removed.
func (ms *mounts) close() {
	ms.cancel()
	deadline := time.NewTimer(unmountWait)
	defer deadline.Stop()
	for len(ms.running) > 0 {
		select {
		case end := <-ms.done:
			delete(ms.running, end.name)
			if end.err != nil {
				ms.log.Warn("input mount", "input", end.name, "err", end.err)
			}
		case <-deadline.C:
			for name, mp := range ms.running {
				ms.log.Warn("input mount did not end: detaching it", "input", name, "mountpoint", mp)
				syscall.Unmount(mp, syscall.MNT_DETACH)
				delete(ms.running, name)
			}
		}
	}
}
