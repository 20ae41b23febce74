package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/mount"
)

var mountCmd = &command{
	name:  "mount",
	args:  "DIGEST MOUNTPOINT --store STORE [flags]",
	short: "serve a snapshot read-only through FUSE (digests only)",
	long: `Mount the snapshot DIGEST read-only at MOUNTPOINT. pinfs mounts digests
only: an alias, "latest", a short prefix or a path is refused with exit
status 2, so a worker can never resolve a moving name.

The manifest and member table are verified before anything is mounted,
and kept in the cache dir so that a remount works while the store is
unreachable. Every member is a file whose bytes come from its pinned
version and are verified against its BLAKE3 digest before any byte is
returned; a mismatch fails the read with EIO and is written to the run
record.

Without --foreground, pinfs mount returns once the mount serves (exit 0)
and the daemon logs to the cache dir; with --foreground it stays attached
and logs to stderr (containers, sidecars). SIGTERM or SIGINT unmounts
(lazily while files are open), writes run_end and exits 0. A dead mount
left by a killed pinfs at MOUNTPOINT is cleaned up first.

With --require-permit (and --run-id R) the mount refuses with exit status
1, before anything is mounted or written to the run record, unless run R
holds a permit (pinfs admit) for exactly DIGEST that checks out against
the store: DIGEST is approved under --policy FILE (without it, for a
permit through a gate, under the policy the gate kept at the permit's
generation; a permit by digest needs --policy, since the policy it names
is anyone's who can write the store), and, through a gate, the gate's
history holds the permit's generation pointing at DIGEST. So the store
must be reachable.

With --policy FILE it refuses, the same way, a snapshot without approvals
that satisfy the trust policy (docs/admission.md); that check reads the
approvals from the store, so it needs the store reachable.

The daemon's memory is one target (--memory-target): its heap, and a pool
of block memory shared by the memory tier, readahead and the blocks of
reads in flight, so that it stays flat however many files are read at
once. Under a cgroup memory limit (a sidecar, a CSI mount pod) the target
defaults to 80% of the limit; else to the sum of the old defaults. The
"memory" log line says what it is and how it is shared (docs/mount.md,
Memory).

A member whose whole verified file is in the disk cache is handed to the
kernel at open (FUSE passthrough, with Linux 6.9+ and root), so its reads
never reach pinfs; such a member counts as read in full in the run
record. Without root, on an older kernel, with the cache dir on overlayfs,
with --cache-disk 0 or --passthrough=false every read goes through pinfs
as before, and the log says why (docs/mount.md, Passthrough).`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		fallbackURL := fallbackFlag(fs)
		cacheDir := fs.String("cache-dir", defaultCacheDir(), "`DIR` for the disk block cache, verified metadata, spooled run-record events and logs")
		cacheMem := byteSize(256 << 20)
		fs.Var(&cacheMem, "cache-mem", "memory block cache budget `SIZE` (e.g. 512MiB; 0 disables). Default: what the memory "+
			"target leaves beside readahead and the blocks of reads in flight (see --memory-target), the default below without one; given, it wins")
		cacheDisk := byteSize(10 << 30)
		fs.Var(&cacheDisk, "cache-disk", "disk block cache budget `SIZE`, least recently used blocks evicted (0 disables)")
		record := fs.String("run-record", "", recordHelp)
		runID := fs.String("run-id", "", "run `ID`; the same id with the same digest resumes, with another digest is refused (default: generated and printed)")
		requirePermit := fs.Bool("require-permit", false, "refuse unless the run (--run-id) holds a permit (pinfs admit) for exactly DIGEST that checks out against the store")
		policyFile := policyFlag(fs)
		mkdir := fs.BoolP("mkdir", "m", false, "create MOUNTPOINT, and its missing parents (mode 0755, as mkdir -p), when it does not exist, as mount(8) -m does")
		foreground := fs.Bool("foreground", false, "stay attached and log to stderr")
		allowOther := fs.Bool("allow-other", false, "let other users (e.g. the trainer container's user) read the mount")
		uid := fs.Uint32("uid", uint32(os.Getuid()), "`UID` that owns files and directories")
		gid := fs.Uint32("gid", uint32(os.Getgid()), "`GID` that owns files and directories")
		metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics (/metrics) and pprof (/debug/pprof/) at `ADDR`, e.g. 127.0.0.1:9464; keep it on loopback: pprof shows the process's memory, and a mount on any other address logs a warning")
		debug := fs.Bool("debug", false, "log at debug level: every FUSE request, and the SDK's detail of errors")
		readTimeout := fs.Duration("read-timeout", 60*time.Second, "fail a read with EIO (and a fetch_failed event) when the store has not delivered its blocks within `DURATION`, retries and throttling included; keep it longer than --stall-timeout")
		stallTimeout := fs.Duration("stall-timeout", 30*time.Second, "cut off and resume a store response that delivers no bytes for `DURATION`")
		ra := readaheadFlags(fs)
		mem := memoryTargetFlag(fs)
		passthrough := fs.Bool("passthrough", true, "let the kernel serve an open of a member whose verified whole-member file is in the disk cache straight from that file (FUSE passthrough: Linux 6.9+, as root; the log says why when it is off); the run record then counts the member as read in full. --passthrough=false serves every read through pinfs")
		flushInterval := fs.Duration("flush-interval", time.Minute, "write what was read since the last time to the run record every `DURATION` (a crash loses at most this much of the consumed set)")
		return func(ctx context.Context, args []string) error {
			if len(args) != 2 {
				return usagef("want DIGEST MOUNTPOINT, got %d arguments", len(args))
			}
			d, err := parseSnapshot(args[0], *storeURL)
			if err != nil {
				return err
			}
			// Before the daemon starts: its usage error would come back
			// as a failure to mount (exit 1).
			if err := needStore(*storeURL); err != nil {
				return err
			}
			if err := checkFallback(*storeURL, *fallbackURL); err != nil {
				return err
			}
			if *flushInterval <= 0 {
				return usagef("--flush-interval %v: want a positive duration such as 1m or 30s", *flushInterval)
			}
			raMax, raBudget, err := ra.values()
			if err != nil {
				return err
			}
			target, err := mem.value()
			if err != nil {
				return err
			}
			if *requirePermit && *runID == "" {
				return usagef("--require-permit needs --run-id R: a permit is held by the run it was written for")
			}
			mnt, err := filepath.Abs(args[1])
			if err != nil {
				return err
			}
			if *cacheDir == "" {
				return errors.New("no default cache dir: $XDG_CACHE_HOME and $HOME are unset; pass --cache-dir DIR (a directory only this user can write)")
			}
			if err := mount.PrepareCacheDir(*cacheDir); err != nil {
				return err
			}
			if *record, err = recordURL(*record, *cacheDir); err != nil {
				return err
			}
			p, err := loadPolicy(*policyFile)
			if err != nil {
				return err
			}
			if err := mount.CheckMountpoint(mnt, *mkdir); err != nil {
				return err
			}
			if !*foreground {
				return background(out, *cacheDir, mnt)
			}
			st, err := openReadStore(ctx, *storeURL, *fallbackURL)
			if err != nil {
				mount.Notify("", err)
				return err
			}
			return mount.Run(ctx, mount.Config{
				Digest: d, Mountpoint: mnt, Store: st, CacheDir: *cacheDir,
				CacheMem: int64(cacheMem), CacheDisk: int64(cacheDisk),
				RunRecord: *record, RunID: *runID, RequirePermit: *requirePermit, Policy: p, AllowOther: *allowOther,
				UID: *uid, GID: *gid, Debug: *debug, Log: logFrom(ctx), Out: out, MetricsAddr: *metricsAddr,
				ReadTimeout: *readTimeout, StallTimeout: *stallTimeout, FlushInterval: *flushInterval,
				ReadaheadMax: raMax, ReadaheadBudget: raBudget, Passthrough: *passthrough,
				MemoryTarget: target, FromCgroup: true, CacheMemSet: mem.given("cache-mem"), ReadaheadBudgetSet: mem.given("readahead-budget"),
			})
		}
	},
}

// unmountWait bounds how long pinfs unmount waits for the daemon to
// finish the run record and exit.
const unmountWait = 30 * time.Second

// background runs this same command line with --foreground as a detached
// daemon and returns once it serves.
func background(out io.Writer, cacheDir, mnt string) error {
	logs := filepath.Join(cacheDir, "logs")
	if err := os.MkdirAll(logs, 0o700); err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(mnt))
	logPath := filepath.Join(logs, "mount-"+hex.EncodeToString(sum[:6])+".log")
	args := append(append([]string{}, os.Args[1:]...), "--foreground")
	pid, runID, err := mount.Background(args, logPath, 2*time.Minute)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "run %s mounted at %s (pid %d, log %s)\n", runID, mnt, pid, logPath)
	return nil
}

// defaultCacheDir is $XDG_CACHE_HOME/pinfs or ~/.cache/pinfs, or "" when
// neither variable is set: then mount asks for --cache-dir rather than
// use a shared, guessable directory such as /tmp/pinfs-cache, which
// another local user could have created first.
func defaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "pinfs")
	}
	return ""
}

var unmountCmd = &command{
	name:  "unmount",
	args:  "MOUNTPOINT [--lazy]",
	short: "unmount a pinfs mount",
	long: `Unmount MOUNTPOINT. The pinfs daemon notices, writes the consumed set and
run_end to the run record, and exits; pinfs unmount returns once it has
(waiting at most 30 s, then warning), so pinfs run show right after sees
the whole run. With --lazy a busy mount is detached at once and goes away
when its last open file is closed (no wait). Without root,
pinfs unmount falls back to fusermount3 -u (-z with --lazy), which lets
the user who mounted unmount.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		lazy := fs.Bool("lazy", false, "detach a busy mount instead of failing with EBUSY")
		return func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usagef("want MOUNTPOINT, got %d arguments", len(args))
			}
			err := mount.UnmountAndWait(ctx, args[0], *lazy, unmountWait)
			if errors.Is(err, mount.ErrDaemonBusy) {
				logFrom(ctx).Warn(err.Error()) // unmounted: the run record will say run_end when the daemon is done
				return nil
			}
			return err
		}
	},
}
