package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/buildinfo"
)

// TestVersion: pinfs version and pinfs --version print the build on one
// line; --json prints it as the buildinfo.Info that run records carry.
func TestVersion(t *testing.T) {
	want := "pinfs " + buildinfo.Get().String() + "\n"
	if buildinfo.Get().Version == "" {
		t.Fatal("buildinfo.Get() has no version")
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), args, &out, &errOut); code != exitOK || out.String() != want || errOut.Len() != 0 {
			t.Errorf("pinfs %v: exit %d, stdout %q, stderr %q; want exit 0 and %q", args, code, out.String(), errOut.String(), want)
		}
	}
	for _, args := range [][]string{{"version", "--json"}, {"--version", "--json"}} {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), args, &out, &errOut); code != exitOK {
			t.Fatalf("pinfs %v: exit %d: %s", args, code, errOut.String())
		}
		var got buildinfo.Info
		dec := json.NewDecoder(&out)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil || got != buildinfo.Get() {
			t.Errorf("pinfs %v printed %+v (%v), want %+v", args, got, err, buildinfo.Get())
		}
	}
}
