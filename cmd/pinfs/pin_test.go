package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store/dial"
	"github.com/pinfs/pinfs/verify"
)

// TestPinRefusesTransformWithoutDigest: a --transform that is a tag, not a
// digest, is a usage error (exit 2, one line) and nothing is pinned; one
// pinned by a digest is recorded in the manifest.
func TestPinRefusesTransformWithoutDigest(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"pin", src, "--store", dir, "--transform", "registry/harvest:v1"}, &out, &errOut)
	const want = "pinfs pin: --transform registry/harvest:v1: not pinned by a digest (NAME@sha256:<64 hex>, " +
		"or NAME@<40 or 64 hex commit>); same tag, new digest cannot be detected otherwise; name the image by its digest: " +
		"registry/harvest:v1@sha256:<64 hex>\n"
	if code != exitUsage || errOut.String() != want || out.Len() != 0 {
		t.Fatalf("pin --transform TAG: exit %d, stdout %q, stderr %q; want exit %d and\n%s", code, out.String(), errOut.String(), exitUsage, want)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Errorf("a refused pin wrote %d entries into the store", len(es))
	}

	transform := "registry/harvest:v1@sha256:" + strings.Repeat("ab", 32)
	out.Reset()
	errOut.Reset()
	if code := run(ctx, []string{"pin", src, "--store", dir, "--transform", transform}, &out, &errOut); code != exitOK {
		t.Fatalf("pin --transform NAME@DIGEST: exit %d: %s", code, errOut.String())
	}
	d, err := verify.ParseDigest(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatal(err)
	}
	st, err := dial.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := verify.Load(ctx, st, d)
	if err != nil || snap.Manifest().Transform != transform {
		t.Fatalf("pinned manifest: transform %v (%v), want %s", snap, err, transform)
	}
}

// TestPinRefusesTransformVersionNamingDerive: pin --transform harvest@v1
// (the form pinfs derive takes) is refused on one line that names pinfs
// derive --transform as where a version belongs.
func TestPinRefusesTransformVersionNamingDerive(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"pin", src, "--store", t.TempDir(), "--transform", "harvest@v1"}, &out, &errOut)
	msg := errOut.String()
	if code != exitUsage || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "not pinned by a digest") ||
		!strings.Contains(msg, "a version such as harvest@v1 is for pinfs derive --transform, whose --check reruns the derivation") {
		t.Fatalf("pin --transform harvest@v1: exit %d, stderr %q; want exit 2 and one line naming pinfs derive --transform", code, msg)
	}
}
