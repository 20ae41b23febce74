package fs

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Reasons passthrough is off, as Probe and the mount give them in status
// and in the log line "passthrough off".
const (
	ReasonDisabled = "disabled (--passthrough=false)"
	ReasonNoDisk   = "no disk cache (--cache-disk 0): no files to hand over"
	ReasonKernel   = "the kernel did not offer FUSE passthrough (Linux 6.9+ with CONFIG_FUSE_PASSTHROUGH)"
	ReasonNoAdmin  = "no CAP_SYS_ADMIN: the kernel takes backing files only from root"
	ReasonStacked  = "the cache dir is on a stacked file system (overlayfs): FUSE passthrough's stacking depth is exceeded"
	ReasonRefused  = "the kernel refused a member's backing file after the probe (go-fuse then turns backing files off for the mount)"
)

// backingRegistrar is the part of *fuse.Server that Probe uses.
type backingRegistrar interface {
	KernelSettings() *fuse.InitIn
	RegisterBackingFd(*fuse.BackingMap) (int32, syscall.Errno)
	UnregisterBackingFd(int32) syscall.Errno
}

// Probe decides whether the mount served by server may hand the kernel
// backing files, by registering probe, a regular file in the cache dir
// (where member files live), and unregistering it again. It turns p on
// and returns "" when that worked, or leaves p off and returns the
// reason. go-fuse would learn the same at the first open, but then turn
// backing files off for good without saying why.
func (p *Passthrough) Probe(server backingRegistrar, probe *os.File) string {
	reason := probeReason(server, probe, hasSysAdmin)
	if reason != "" {
		p.Off(reason)
		return reason
	}
	p.on.Store(true)
	return ""
}

// probeReason is Probe's decision, with the capability check given.
func probeReason(server backingRegistrar, probe *os.File, admin func() bool) string {
	if in := server.KernelSettings(); in == nil || in.Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		return ReasonKernel
	}
	if !admin() {
		return ReasonNoAdmin
	}
	id, errno := server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(probe.Fd())})
	if errno != 0 {
		return registerReason(errno)
	}
	if errno := server.UnregisterBackingFd(id); errno != 0 {
		return fmt.Sprintf("unregistering the probe's backing file: %s", errnoName(errno))
	}
	return ""
}

// registerReason explains a failed FUSE_DEV_IOC_BACKING_OPEN.
func registerReason(errno syscall.Errno) string {
	switch {
	case errors.Is(errno, syscall.ELOOP):
		return ReasonStacked
	case errors.Is(errno, syscall.EPERM):
		return ReasonNoAdmin
	}
	return fmt.Sprintf("the kernel refused the probe's backing file: %s", errnoName(errno))
}

// errnoName is the errno's symbol and text, such as "EOPNOTSUPP (operation not supported)".
func errnoName(errno syscall.Errno) string {
	if n := unix.ErrnoName(errno); n != "" {
		return fmt.Sprintf("%s (%v)", n, errno)
	}
	return errno.Error()
}

// hasSysAdmin reports whether this process has CAP_SYS_ADMIN in its
// effective set, which the kernel requires of a passthrough server.
func hasSysAdmin() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return os.Geteuid() == 0
	}
	const bit = unix.CAP_SYS_ADMIN
	return data[bit/32].Effective&(1<<(bit%32)) != 0
}
