package pin

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// secretSize is larger than one Bao group, so that a leak would also leave
// an outboard behind.
const secretSize = 3*b3.GroupSize + 17

// secretFile writes a file outside any pinned tree and returns its path
// and content.
func secretFile(t testing.TB) (string, []byte) {
	t.Helper()
	secret := bytes.Repeat([]byte("SECRET!"), secretSize/7+1)[:secretSize]
	p := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(p, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, secret
}

// assertStoreClean fails if any file of the store holds secret, or if a
// CAS blob does not hash to its name.
func assertStoreClean(t testing.TB, p *Pinner, secret []byte) {
	t.Helper()
	root := p.Store.String()
	sum := b3.Of(secret)
	filepath.WalkDir(root, func(name string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Error(err)
			return nil
		}
		if len(secret) > 0 && bytes.Contains(b, secret) || strings.Contains(name, sum.Hex()) {
			t.Errorf("the store holds the secret: %s", name)
		}
		if filepath.Base(filepath.Dir(name)) == "blake3" && filepath.Base(filepath.Dir(filepath.Dir(name))) == "cas" {
			if got := b3.Of(b).Hex(); got != filepath.Base(name) {
				t.Errorf("CAS blob %s holds bytes that hash to %s", name, got)
			}
		}
		return nil
	})
}

// TestDirPinRefusesSymlinkSwappedAfterWalk: a file (or a directory above
// it) replaced by a symlink to a file of the same size between the walk and
// the copy, or by a hard link to one, must fail the pin, name the file, and
// store nothing of the link's target.
func TestDirPinRefusesSymlinkSwappedAfterWalk(t *testing.T) {
	for _, tc := range []struct {
		name string
		swap func(t testing.TB, src, secret string)
	}{
		{"file", func(t testing.TB, src, secret string) {
			victim := filepath.Join(src, "sub", "victim.bin")
			if err := os.Remove(victim); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(secret, victim); err != nil {
				t.Fatal(err)
			}
		}},
		{"hard link", func(t testing.TB, src, secret string) {
			// Not a link at all: another regular file of the same size.
			victim := filepath.Join(src, "sub", "victim.bin")
			if err := os.Remove(victim); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(secret, victim); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory", func(t testing.TB, src, secret string) {
			// sub becomes a link to a directory whose victim.bin is the
			// secret itself (a hard link keeps its inode and size).
			other := filepath.Join(t.TempDir(), "etc")
			if err := os.Mkdir(other, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(secret, filepath.Join(other, "victim.bin")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(src, "sub"), filepath.Join(t.TempDir(), "old")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, filepath.Join(src, "sub")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secretPath, secret := secretFile(t)
			src := writeTree(t, map[string]string{
				"sub/victim.bin": strings.Repeat("p", secretSize), "other": "fine",
			})
			p := newPinner(t)
			p.afterWalk = func() { tc.swap(t, src, secretPath) }
			_, err := p.Dir(context.Background(), src)
			t.Logf("pin: %v", err)
			if err == nil || !strings.Contains(err.Error(), "sub/victim.bin") {
				t.Fatalf("pin of a file swapped for a symlink = %v; want an error naming sub/victim.bin", err)
			}
			assertStoreClean(t, p, secret)
		})
	}
}

// TestDirPinRefusesFIFOSwappedAfterWalk: a FIFO swapped in for a file must
// fail the pin promptly (not hang on open or read) and name the file.
func TestDirPinRefusesFIFOSwappedAfterWalk(t *testing.T) {
	src := writeTree(t, map[string]string{"victim.bin": "0123456789", "other": "fine"})
	p := newPinner(t)
	p.afterWalk = func() {
		victim := filepath.Join(src, "victim.bin")
		if err := os.Remove(victim); err != nil {
			t.Error(err)
		}
		if err := syscall.Mkfifo(victim, 0o644); err != nil {
			t.Error(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Dir(context.Background(), src)
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("pin: %v", err)
		if err == nil || !strings.Contains(err.Error(), "victim.bin") {
			t.Fatalf("pin of a file swapped for a FIFO = %v; want an error naming victim.bin", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("pin of a file swapped for a FIFO hangs")
	}
	assertStoreClean(t, p, nil)
}

// TestDirPinFailsWhenFileChangesDuringPin: a file rewritten (same size)
// after it was hashed and before its bytes are stored must fail the pin,
// named, and leave no CAS blob whose bytes do not match its digest.
func TestDirPinFailsWhenFileChangesDuringPin(t *testing.T) {
	for _, size := range []int{10, secretSize} {
		src := writeTree(t, map[string]string{"data.bin": strings.Repeat("a", size), "other": "fine"})
		p := newPinner(t)
		p.afterHash = func(file string) {
			if filepath.Base(file) != "data.bin" {
				return
			}
			f, err := os.OpenFile(file, os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("CHANGED"), int64(size)-7); err != nil {
				t.Error(err)
			}
		}
		_, err := p.Dir(context.Background(), src)
		t.Logf("size %d: pin: %v", size, err)
		if err == nil || !strings.Contains(err.Error(), "data.bin") || !strings.Contains(err.Error(), "changed while it was being pinned") {
			t.Fatalf("size %d: pin of a file changed during its pin = %v; want data.bin: ... changed while it was being pinned", size, err)
		}
		assertStoreClean(t, p, nil)
	}
}

// TestDirPinReplacesBadCASBlob: a CAS blob of the right size but wrong
// bytes (a torn or tampered copy) must not be trusted by a later pin of
// that content: the pin stores the right bytes.
func TestDirPinReplacesBadCASBlob(t *testing.T) {
	content := strings.Repeat("good", 1000)
	src := writeTree(t, map[string]string{"f": content})
	p := newPinner(t)
	sum := b3.Of([]byte(content))
	bad := filepath.Join(p.Store.String(), filepath.FromSlash(verify.CASKey(sum.Hex())))
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, bytes.Repeat([]byte("x"), len(content)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Dir(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(bad)
	if err != nil || string(got) != content {
		t.Fatalf("after a clean pin the CAS blob holds %.20q..., %v; want the pinned bytes", got, err)
	}
	assertStoreClean(t, p, nil)
}
