package fs

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
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
			Options:          []string{"ro", "nodev", "nosuid"},
			DirectMount:      true,
			DirectMountFlags: syscall.MS_RDONLY | syscall.MS_NODEV | syscall.MS_NOSUID,
			FsName:           name,
			Name:             "pinfs",
			MaxWrite:         maxRead, // go-fuse sets max_read to MaxWrite
			MaxBackground:    maxBackground,
			// The kernel then asks READDIRPLUS only for a listing's first
			// chunk and after a LOOKUP in the directory (ls -l, a stat
			// after listing), and plain READDIR otherwise: a find, which
			// looks nothing up, gets names and types at a quarter of the
			// bytes per entry (no fuse_entry_out) and of the requests.
			ExtraCapabilities: fuse.CAP_READDIRPLUS_AUTO,
			// Not IgnoreSecurityLabels: it answers the ACL names with
			// ENODATA before the nodes see them, and the nodes answer
			// ENOTSUP (see unsupported).
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
	if err := precheck(devFuse, fuseConf, os.Getuid(), o); err != nil {
		return nil, err
	}
	server, err := gofs.Mount(dir, root, opts)
	if err != nil {
		return nil, mountError(err)
	}
	if err := setReadAhead(dir, readAheadKB); errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		log.Debug("kernel readahead left at its default: only root may set it", "err", err)
	} else if err != nil {
		log.Warn("kernel readahead left at its default", "err", err)
	}
	return server, nil
}

// The FUSE device and fusermount's configuration file.
const (
	devFuse  = "/dev/fuse"
	fuseConf = "/etc/fuse.conf"
)

// precheck returns a one-line error for what would otherwise fail the
// mount with only "fusermount exited with code 256" to show for it: a
// FUSE device that this user cannot open (fusermount opens it as the
// calling user too), or allow_other asked for by a user other than root
// (uid) when fusermount's configuration conf does not permit it.
func precheck(dev, conf string, uid int, o MountOptions) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return deviceError(dev, err)
	}
	f.Close()
	if o.AllowOther && uid != 0 && !userAllowOther(conf) {
		return fmt.Errorf("--allow-other as a user other than root needs a line user_allow_other in %s (or mount as root)", conf)
	}
	return nil
}

// deviceError is the one-line error of opening the FUSE device dev that
// failed with err, saying what to do about it.
func deviceError(dev string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("cannot open %s: it does not exist (load the fuse module, or pass the device to the container: --device /dev/fuse)", dev)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("cannot open %s: permission denied (make it rw for this user, mode 0666, or mount as root)", dev)
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("cannot open %s: %v", dev, err)
}

// userAllowOther reports whether fusermount's configuration file conf has
// the line user_allow_other, which lets users other than root mount with
// allow_other.
func userAllowOther(conf string) bool {
	b, err := os.ReadFile(conf)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		line, _, _ = strings.Cut(line, "#")
		if strings.TrimSpace(line) == "user_allow_other" {
			return true
		}
	}
	return false
}

// mountError puts go-fuse's mount error on one line. go-fuse reports a
// failed fusermount only by its exit code; fusermount printed the reason
// just before, on this process's stderr (the mount log, in the
// background).
func mountError(err error) error {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	if strings.Contains(msg, "fusermount exited") {
		return errors.New("fusermount could not mount (its own message is just before this line, on stderr or in the mount log)")
	}
	if msg != err.Error() {
		return &oneLineError{msg: msg, err: err}
	}
	return err
}

// oneLineError is err with its text on one line.
type oneLineError struct {
	msg string
	err error
}

func (e *oneLineError) Error() string { return e.msg }
func (e *oneLineError) Unwrap() error { return e.err }

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
