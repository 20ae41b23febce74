package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify/sign"
)

func TestKeyGenerate(t *testing.T) {
	ctx := context.Background()
	prefix := filepath.Join(t.TempDir(), "alice")
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"key", "generate", prefix}, &out, &errOut); code != exitOK {
		t.Fatalf("pinfs key generate: exit %d: %s", code, errOut.String())
	}
	s, err := sign.LoadSigner(prefix + ".key")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"private key " + prefix + ".key", "public key  " + prefix + ".pub", "key id      " + s.KeyID() + "\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if fi, err := os.Stat(prefix + ".key"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	key, _ := os.ReadFile(prefix + ".key")

	out.Reset()
	errOut.Reset()
	if code := run(ctx, []string{"key", "generate", prefix}, &out, &errOut); code != exitFailed {
		t.Fatalf("pinfs key generate over an existing key: exit %d, want %d", code, exitFailed)
	}
	if msg := errOut.String(); !strings.Contains(msg, prefix+".key already exists") || strings.Count(msg, "\n") != 1 {
		t.Errorf("refusal %q, want one line naming the existing file", msg)
	}
	if again, _ := os.ReadFile(prefix + ".key"); !bytes.Equal(key, again) {
		t.Fatal("the existing key was overwritten")
	}
}

func TestKeyUsage(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"key"},
		{"key", "generate"},
		{"key", "rotate", filepath.Join(dir, "a")},
		{"key", "generate", filepath.Join(dir, "a"), filepath.Join(dir, "b")},
		{"key", "generate", dir},
		{"key", "generate", dir + "/"},
		{"key", "generate", ""},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != exitUsage {
			t.Errorf("pinfs %q: exit %d, want %d (%s)", args, code, exitUsage, errOut.String())
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("usage errors wrote %d files", len(entries))
	}
}
