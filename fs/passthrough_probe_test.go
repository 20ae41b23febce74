package fs

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// fakeRegistrar answers Probe as a kernel would: flags offered at INIT,
// and the errno of registering a backing file.
type fakeRegistrar struct {
	flags        uint64
	errno        syscall.Errno
	registered   int
	unregistered int
}

func (f *fakeRegistrar) KernelSettings() *fuse.InitIn {
	in := &fuse.InitIn{Flags: uint32(f.flags), Flags2: uint32(f.flags >> 32)}
	return in
}

func (f *fakeRegistrar) RegisterBackingFd(*fuse.BackingMap) (int32, syscall.Errno) {
	if f.errno != 0 {
		return 0, f.errno
	}
	f.registered++
	return 7, 0
}

func (f *fakeRegistrar) UnregisterBackingFd(id int32) syscall.Errno {
	if id == 7 {
		f.unregistered++
	}
	return 0
}

// TestProbeReasons: each way the kernel can refuse passthrough turns it
// off with its own reason; a probe that registers unregisters again.
func TestProbeReasons(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		name  string
		flags uint64
		errno syscall.Errno
		admin bool
		want  string
	}{
		{"on", fuse.CAP_PASSTHROUGH, 0, true, ""},
		{"old kernel", fuse.CAP_ASYNC_READ, 0, true, ReasonKernel},
		{"not root", fuse.CAP_PASSTHROUGH, 0, false, ReasonNoAdmin},
		{"EPERM", fuse.CAP_PASSTHROUGH, syscall.EPERM, true, ReasonNoAdmin},
		{"overlayfs", fuse.CAP_PASSTHROUGH, syscall.ELOOP, true, ReasonStacked},
		{"other", fuse.CAP_PASSTHROUGH, syscall.EOPNOTSUPP, true, "ENOTSUP (operation not supported)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := &fakeRegistrar{flags: c.flags, errno: c.errno}
			got := probeReason(reg, f, func() bool { return c.admin })
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("reason %q, want %q", got, c.want)
			}
			if reg.registered != reg.unregistered {
				t.Errorf("%d registered, %d unregistered", reg.registered, reg.unregistered)
			}
		})
	}
}

// TestProbeSwitch: Probe turns the switch on, or leaves it off with the
// reason in Status.
func TestProbeSwitch(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var p Passthrough
	if st := p.Status(); st.Enabled {
		t.Fatalf("a new Passthrough is on: %+v", st)
	}
	if reason := p.Probe(&fakeRegistrar{flags: 0}, f); reason != ReasonKernel || p.enabled() || p.Status().Reason != ReasonKernel {
		t.Errorf("probe of an old kernel: %q, status %+v", reason, p.Status())
	}
	if !hasSysAdmin() {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but not CAP_SYS_ADMIN: cannot switch on (.ci/run runs as root)")
		}
		t.Skip("not CAP_SYS_ADMIN: cannot switch on")
	}
	if reason := p.Probe(&fakeRegistrar{flags: fuse.CAP_PASSTHROUGH}, f); reason != "" || !p.enabled() || p.Status().Reason != "" {
		t.Errorf("probe that registers: %q, status %+v", reason, p.Status())
	}
}
