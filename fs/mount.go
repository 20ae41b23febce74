package fs

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// MountOptions configure Mount.
type MountOptions struct {
	AllowOther bool   // let other users than the mounter access the mount
	Debug      bool   // log every FUSE request (at info level, so that it shows)
	Name       string // the mount's source in /proc/mounts, e.g. the digest; "pinfs" when empty
}

// maxRead is the largest read request the kernel sends (max_read).
const maxRead = 1 << 20

// Kernel tuning of the mount, from measurements with `make bench`:
// FUSE's default readahead (128 KiB) and 12 background requests keep a
// sequential reader at a fraction of what the store delivers; a readahead
// window of a few MiB and more requests in flight let the kernel ask for
// whole 1 MiB blocks ahead of the reader.
const (
	readAheadKB   = 8 << 10 // the mount's read_ahead_kb (8 MiB)
	maxBackground = 64      // asynchronous (readahead) requests in flight
)

// Mount mounts root at dir read-only (ro, nodev, nosuid; type fuse.pinfs)
// with a direct mount(2), falling back to fusermount, with reads of up to
// 1 MiB, and returns the serving server once the mount is ready. The
// caller unmounts with server.Unmount. Entry and attribute timeouts and
// the logger come from the Options given to NewRoot when root is one of
// this package's roots; failed lookups are cached for the entry timeout.
func Mount(dir string, root gofs.InodeEmbedder, o MountOptions) (*fuse.Server, error) {
	entry, attr := DefaultTimeout, DefaultTimeout
	log := slog.Default()
	if r, ok := root.(*rootDir); ok {
		entry, attr, log = r.t.opts.EntryTimeout, r.t.opts.AttrTimeout, r.t.log
	}
	name := o.Name
	if name == "" {
		name = "pinfs"
	}
	opts := &gofs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther: o.AllowOther,
			// fusermount reads these; a direct mount turns nodev and
			// nosuid into flags and passes ro on as a superblock flag.
			Options:              []string{"ro", "nodev", "nosuid"},
			DirectMount:          true,
			DirectMountFlags:     syscall.MS_RDONLY | syscall.MS_NODEV | syscall.MS_NOSUID,
			FsName:               name,
			Name:                 "pinfs",
			MaxWrite:             maxRead, // go-fuse sets max_read to MaxWrite
			MaxBackground:        maxBackground,
			IgnoreSecurityLabels: true,
			// pinfs replies with bytes in memory, never a file
			// descriptor, so splice cannot apply: without this go-fuse
			// still tries it for every plain data reply (a pipe per
			// reply, and a "trySplice" log line per 1 MiB reply, which
			// does not fit the 1 MiB pipe with its header).
			DisableSplice: true,
			Debug:         o.Debug,
			Logger:        slog.NewLogLogger(log.Handler(), slog.LevelInfo),
		},
		EntryTimeout:    durationPtr(entry),
		AttrTimeout:     durationPtr(attr),
		NegativeTimeout: durationPtr(entry),
		NullPermissions: true,
		RootStableAttr:  &gofs.StableAttr{Ino: rootIno},
		Logger:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	server, err := gofs.Mount(dir, root, opts)
	if err != nil {
		return nil, err
	}
	if err := setReadAhead(dir, readAheadKB); err != nil {
		log.Warn("kernel readahead left at its default", "err", err)
	}
	return server, nil
}

// setReadAhead sets the read_ahead_kb of the mount's backing device
// (/sys/class/bdi/0:<minor>). Files opened afterwards use the new window.
func setReadAhead(dir string, kb int) error {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return err
	}
	major, minor := (st.Dev>>8)&0xfff, (st.Dev&0xff)|((st.Dev>>12)&0xfff00)
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", major, minor)
	return os.WriteFile(p, []byte(strconv.Itoa(kb)), 0)
}

func durationPtr(d time.Duration) *time.Duration { return &d }
