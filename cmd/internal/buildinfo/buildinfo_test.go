package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	got := fromBuildInfo(bi, true)
	want := Info{Version: "v0.3.0", Revision: "0123456789abcdef0123", Modified: true, GoVersion: "go1.26.0"}
	if got != want {
		t.Fatalf("fromBuildInfo = %+v, want %+v", got, want)
	}
	if s, w := got.String(), "v0.3.0 (rev 0123456789ab+dirty, go1.26.0)"; s != w {
		t.Errorf("String = %q, want %q", s, w)
	}
	if got := fromBuildInfo(nil, false); got.Version != "unknown" || got.String() != "unknown" {
		t.Errorf("no build info: %+v %q", got, got.String())
	}
}

func TestGetIsStable(t *testing.T) {
	a, b := Get(), Get()
	if a != b || a.Version == "" {
		t.Fatalf("Get = %+v then %+v", a, b)
	}
}
