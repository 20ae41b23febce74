package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// failReader fails the test if it is read.
type failReader struct{ t *testing.T }

func (r failReader) Read([]byte) (int, error) {
	r.t.Fatal("read a source whose claimed size is beyond the limit")
	return 0, io.EOF
}

func TestReadAtMost(t *testing.T) {
	if _, err := ReadAtMost(failReader{t}, 11, 10, "runs/x"); !errors.Is(err, ErrTooLarge) || err.Error() != "runs/x: more than 10 bytes, the most pinfs reads of it: larger than pinfs reads" {
		t.Fatalf("a claimed size beyond the limit: %v", err)
	}
	for _, size := range []int64{-1, 0, 5} { // unknown, or a claim that lies
		if _, err := ReadAtMost(bytes.NewReader(make([]byte, 11)), size, 10, "k"); !errors.Is(err, ErrTooLarge) {
			t.Errorf("11 bytes claimed as %d, limit 10: %v", size, err)
		}
		if b, err := ReadAtMost(bytes.NewReader(make([]byte, 10)), size, 10, "k"); err != nil || len(b) != 10 {
			t.Errorf("10 bytes claimed as %d, limit 10: %d, %v", size, len(b), err)
		}
	}
	if b, err := ReadAtMost(iotestOneByte(strings.NewReader("hello")), -1, 1<<20, "k"); err != nil || string(b) != "hello" {
		t.Fatalf("a reader of one byte a call: %q, %v", b, err)
	}
	lr := LimitReader(bytes.NewReader(make([]byte, 17<<20)), MaxRecord, "runs/x")
	if n, err := io.Copy(io.Discard, lr); !errors.Is(err, ErrTooLarge) || n > MaxRecord || !strings.Contains(err.Error(), "16 MiB") {
		t.Fatalf("LimitReader of 17 MiB, limit 16 MiB: %d bytes, %v", n, err)
	}
	if n, err := io.Copy(io.Discard, LimitReader(bytes.NewReader(make([]byte, 1000)), 1000, "k")); n != 1000 || err != nil {
		t.Fatalf("LimitReader at its limit: %d, %v", n, err)
	}
}

// iotestOneByte returns a reader that reads one byte a call.
func iotestOneByte(r io.Reader) io.Reader { return oneByte{r} }

type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) { return o.r.Read(p[:min(1, len(p))]) }

func TestMaxBlob(t *testing.T) {
	for key, want := range map[string]int64{
		"runs/r1/events/x.json":    MaxRecord,
		"gates/prod/head":          MaxRecord,
		"policies/sha256/ab":       MaxRecord,
		"reports/sha256/ab":        MaxRecord,
		"lists/sha256/ab":          MaxRecord,
		"derivations/sha256/ab":    MaxRecord,
		"versions/heads/sha256/ab": MaxRecord,
		"anything/else":            MaxRecord,
		"manifests/sha256/ab":      MaxManifest,
		"members/sha256/ab":        MaxTable,
		"shards/sha256/ab/0":       MaxTable,
		"versions/sha256/ab":       MaxTable,
		"bao/blake3/ab":            MaxOutboard,
	} {
		if got := MaxBlob(key); got != want {
			t.Errorf("MaxBlob(%q) = %d, want %d", key, got, want)
		}
	}
	if TableLimit(1000) != 1<<20+1000*MaxTableLine || TableLimit(1<<40) != MaxTable || TableLimit(-1) != MaxTable {
		t.Errorf("TableLimit: %d %d %d", TableLimit(1000), TableLimit(1<<40), TableLimit(-1))
	}
}

// getter is a Get without GetAtMost.
type getter []byte

func (g getter) Get(context.Context, string) ([]byte, error) { return g, nil }

func TestGetAtMostWithoutTheMethod(t *testing.T) {
	if _, err := GetAtMost(t.Context(), getter("12345"), "k", 4); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("5 bytes, at most 4: %v", err)
	}
	if b, err := GetAtMost(t.Context(), getter("1234"), "k", 4); err != nil || string(b) != "1234" {
		t.Fatalf("4 bytes, at most 4: %q, %v", b, err)
	}
}
