package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
	record "github.com/pinfs/pinfs/verify/derive"
)

// TestDeriveUsage: every way of calling pinfs derive wrongly is exit 2,
// one line on stderr, nothing on stdout, and nothing written to the store
// or the cache dir, since it is refused before anything is mounted or run.
func TestDeriveUsage(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	for _, c := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"--input", "raw=latest", "--transform", "t@v1", "--", "true"}, "--input raw: \"latest\": pinfs accepts manifest digests only"},
		{[]string{"--input", "raw=prod", "--transform", "t@v1", "--", "true"}, "never an alias"},
		{[]string{"--input", "raw=sha256:abab", "--transform", "t@v1", "--", "true"}, "manifest digests only"},
		{[]string{"--input", "raw=/data", "--transform", "t@v1", "--", "true"}, "manifest digests only"},
		{[]string{"--input", d, "--transform", "t@v1", "--", "true"}, "want NAME=sha256:<64 hex>"},
		{[]string{"--input", "raw=" + d, "--input", "raw=" + d, "--transform", "t@v1", "--", "true"}, "given twice"},
		{[]string{"--input", "raw=" + d, "--input", "RAW=" + d, "--transform", "t@v1", "--", "true"}, "both give $PINFS_INPUT_RAW"},
		{[]string{"--input", "1x=" + d, "--transform", "t@v1", "--", "true"}, "input name 1x"},
		{[]string{"--transform", "t@v1", "--", "true"}, "no --input"},
		{[]string{"--input", "raw=" + d, "--", "true"}, "--transform VERSION is required"},
		{[]string{"--input", "raw=" + d, "--transform", "harvest", "--", "true"}, "--transform harvest: want NAME@VERSION"},
		{[]string{"--input", "raw=" + d, "--transform", "t@v1", "--param", "k", "--", "true"}, "--param k: want KEY=VALUE"},
		{[]string{"--input", "raw=" + d, "--transform", "t@v1", "--param", "a/b=1", "--", "true"}, "param a/b"},
		{[]string{"--input", "raw=" + d, "--transform", "t@v1", "--split", "bad", "--", "true"}, "--split \"bad\""},
		{[]string{"--input", "raw=" + d, "--transform", "t@v1"}, "no command: give it after --"},
		{[]string{"--input", "raw=" + d, "--transform", "t@v1", "--"}, "no command: give it after --"},
		{[]string{"--input", "raw=" + d, "--transform", "t@v1", "sh", "--", "true"}, "unexpected argument sh"},
		{[]string{"--check", d}, "alone would run the command the store's record names; pass the record file from your checkout"},
		{[]string{"--check", d, "--pass-env", "AWS_*", "--", "true"}, "--pass-env AWS_*: want the NAME"},
		{[]string{"--input", "raw=" + d, "--transform", "t@v1", "--pass-env", "A=B", "--", "true"}, "--pass-env A=B"},
		{[]string{"--check", d, "--input", "raw=" + d}, "--check takes no --input"},
		{[]string{"--check", d, "--transform", "t@v1"}, "--check takes no --transform"},
		{[]string{"--check", d, "--param", "k=v"}, "--check takes no --param"},
		{[]string{"--check", ""}, "--check needs"},
		{[]string{"--check", "sha256:abab"}, "manifest digests only"},
	} {
		st, cache := t.TempDir(), filepath.Join(t.TempDir(), "cache")
		var out, errOut bytes.Buffer
		args := append([]string{"derive", "--store", st, "--cache-dir", cache}, c.args...)
		code := run(context.Background(), args, &out, &errOut)
		e := errOut.String()
		if code != exitUsage || out.Len() != 0 || !strings.HasPrefix(e, "pinfs derive: ") || !strings.Contains(e, c.want) ||
			strings.Count(e, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and one line with %q", c.args, code, out.String(), e, exitUsage, c.want)
		}
		if es, _ := os.ReadDir(st); len(es) != 0 {
			t.Errorf("%q: wrote %d entries into the store", c.args, len(es))
		}
	}
}

// TestDeriveCheckRefusesAnotherCommand: a command after -- that is not
// the record file's is refused, exit 1, in one line, before the store or
// the cache dir is touched.
func TestDeriveCheckRefusesAnotherCommand(t *testing.T) {
	d := verify.Digest("sha256:" + strings.Repeat("ab", 32))
	r, err := record.New([]record.Input{{Name: "raw", Digest: d}}, "t@v1", nil, []string{"sh", "t.sh"}, "dir")
	if err != nil {
		t.Fatal(err)
	}
	r.Output, r.Time = d, "2026-12-01T00:00:00Z"
	file := filepath.Join(t.TempDir(), "slice.json")
	if err := writeRecord(file, r); err != nil {
		t.Fatal(err)
	}
	st, cache := filepath.Join(t.TempDir(), "store"), filepath.Join(t.TempDir(), "cache")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"derive", "--store", st, "--cache-dir", cache, "--check", file, "--", "sh", "other.sh"}, &out, &errOut)
	e := errOut.String()
	if code != exitFailed || out.Len() != 0 || strings.Count(e, "\n") != 1 ||
		!strings.Contains(e, `pinfs derive: --check: the command after -- ["sh" "other.sh"] is not the command of record file `+file+`, ["sh" "t.sh"]: nothing was run`) {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and the refusal", code, out.String(), e)
	}
	for _, dir := range []string{st, cache} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s was created (%v)", dir, err)
		}
	}
}
