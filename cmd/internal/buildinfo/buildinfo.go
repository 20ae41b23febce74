// Package buildinfo says which pinfs build is running: the module version
// and the VCS revision that the Go toolchain stamped into the binary.
// `pinfs version`, the run record's run_start and resume events and
// `pinfs status` all report it, so a run record says which pinfs served
// the run.
package buildinfo

import (
	"runtime/debug"
	"sync"
)

// Info is the build of the running binary. The JSON field names are part
// of the run record and status interfaces.
type Info struct {
	Version   string `json:"version"`            // module version: v1.2.3, or (devel) for a build from a checkout
	Revision  string `json:"revision,omitempty"` // VCS revision (vcs.revision), when the build had one
	Modified  bool   `json:"modified,omitempty"` // the work tree had uncommitted changes (vcs.modified)
	GoVersion string `json:"go,omitempty"`       // the toolchain that built it
}

// String is the one-line form: "v1.2.3 (rev 0123abcd, go1.26)", with
// "+dirty" after a revision built from a modified tree.
func (i Info) String() string {
	s := i.Version
	var extra string
	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		extra = "rev " + rev
		if i.Modified {
			extra += "+dirty"
		}
	}
	if i.GoVersion != "" {
		if extra != "" {
			extra += ", "
		}
		extra += i.GoVersion
	}
	if extra != "" {
		s += " (" + extra + ")"
	}
	return s
}

var (
	once sync.Once
	info Info

	// revision is the VCS revision for a build that the toolchain could
	// not stamp: the container image is built from sources without .git,
	// so the Dockerfile passes the commit with
	// -ldflags=-X github.com/pinfs/pinfs/cmd/internal/buildinfo.revision=….
	revision string
)

// Get returns the running binary's build. It never fails: a binary built
// without module support reports version "unknown".
func Get() Info {
	once.Do(func() {
		info = fromBuildInfo(debug.ReadBuildInfo())
		if info.Revision == "" {
			info.Revision = revision
		}
	})
	return info
}

// fromBuildInfo extracts an Info from what debug.ReadBuildInfo returned.
func fromBuildInfo(bi *debug.BuildInfo, ok bool) Info {
	if !ok || bi == nil {
		return Info{Version: "unknown"}
	}
	i := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if i.Version == "" {
		i.Version = "unknown"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
}
