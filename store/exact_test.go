package store

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestExactReader(t *testing.T) {
	for _, tc := range []struct {
		src     string
		n       int64
		want    string
		wantErr error
	}{
		{"hello", 5, "hello", nil},
		{"hello world", 5, "hello", nil},
		{"hello", 0, "", nil},
		{"hello", -1, "hello", nil},
		{"hel", 5, "hel", io.ErrUnexpectedEOF},
		{"", 1, "", io.ErrUnexpectedEOF},
	} {
		for _, wrap := range []func(io.Reader) io.Reader{
			func(r io.Reader) io.Reader { return r },
			iotest.OneByteReader,
			iotest.DataErrReader,
		} {
			rc := ExactReader(io.NopCloser(wrap(strings.NewReader(tc.src))), tc.n)
			got, err := io.ReadAll(rc)
			if string(got) != tc.want || !errors.Is(err, tc.wantErr) && err != tc.wantErr {
				t.Errorf("ExactReader(%q, %d) = %q, %v; want %q, %v", tc.src, tc.n, got, err, tc.want, tc.wantErr)
			}
		}
	}
	// Errors other than EOF pass through.
	boom := errors.New("boom")
	if _, err := io.ReadAll(ExactReader(io.NopCloser(iotest.ErrReader(boom)), 3)); !errors.Is(err, boom) {
		t.Errorf("error passthrough: %v", err)
	}
}

func TestCheckKey(t *testing.T) {
	for _, key := range []string{"a", "manifests/sha256/abc", "cas/blake3/00", "a..b", ".hidden/x"} {
		if err := CheckKey(key); err != nil {
			t.Errorf("CheckKey(%q) = %v; want nil", key, err)
		}
	}
	for _, key := range []string{"", "/a", "a/", "a//b", "..", "a/../b", ".", "a/./b", `a\b`, "a\x00"} {
		if err := CheckKey(key); err == nil {
			t.Errorf("CheckKey(%q) = nil; want error", key)
		}
	}
}

func TestCASKey(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	obj, err := NewCAS("blake3:" + hex)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := CASKey(obj); err != nil || k != "cas/blake3/"+hex {
		t.Errorf("CASKey = %q, %v", k, err)
	}
	if _, err := CASKey(Object{Bucket: "b", Key: "k", VersionID: "v"}); err == nil {
		t.Error("CASKey of an S3 object: want error")
	}
}
