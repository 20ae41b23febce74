package b3_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/pinfs/pinfs/verify/b3"
)

// vectorInput is the input of the official BLAKE3 test vectors: byte i is i % 251.
func vectorInput(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// randomBytes returns n reproducible pseudo-random bytes.
func randomBytes(n int, seed uint64) []byte {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16)})
	b := make([]byte, n)
	r.Read(b)
	return b
}

func TestSumVectors(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{
		// From test_vectors/test_vectors.json of the BLAKE3 reference
		// repository (first 32 bytes of "hash").
		{0, "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"},
		{1, "2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213"},
		{1023, "10108970eeda3eb932baac1428c7a2163b0e924c9a9e25b35bba72b28f70bd11"},
		{1024, "42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af7"},
		{1025, "d00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444"},
		{2048, "e776b6028c7cd22a4d0ba182a8bf62205d2ef576467e838ed6f2529b85fba24a"},
		{2049, "5f4d72f40d7a5f82b15ca2b2e44b1de3c2ef86c426c95c1af0b6879522563030"},
		{3073, "7124b49501012f81cc7f11ca069ec9226cecb8a2c850cfe644e327d22d3e1cd3"},
		{8193, "bab6c09cb8ce8cf459261398d2e7aef35700bf488116ceb94a36d0f5f1b7bc3b"},
		{16384, "f875d6646de28985646f34ee13be9a576fd515f76b5b0a26bb324735041ddde4"},
		{31744, "62b6960e1a44bcc1eb1a611a8d6235b6b4b78f32e7abc4fb4c6cdcce94895c47"},
		{102400, "bc3e3d41a1146b069abffad3c0d44860cf664390afce4d9661f7902e7943e085"},
		// Printed by b3sum 1.2.0 (the Rust reference implementation) for
		// the same input; the official file has no vector this long.
		{65535, "de7d0f4c044c56f56e0c5f7ab247be9491c4520e8688f0f0d25406f46fdfbd03"},
		{65536, "68d647e619a930e7b1082f74f334b0c65a315725569bdc123f0ee11881717bfe"},
		{65537, "7c99f9840a73dfcb6e5bfe4ff6d1558acab7e015640790c26411818bdbe17eca"},
		{1<<20 + 7, "89541f1047f7a56806fe16efda4c2cdc45f141c838e413019f0124189fa55232"},
	} {
		data := vectorInput(tc.n)
		s := b3.Of(data)
		if s.Hex() != tc.want || s.String() != "blake3:"+tc.want {
			t.Errorf("len %d: Of = %s, want blake3:%s", tc.n, s, tc.want)
		}
		// Encode hashes through the Bao tree; its root is the same digest.
		root, _, err := b3.Encode(bytes.NewReader(data), int64(tc.n))
		if err != nil || root.Hex() != tc.want {
			t.Errorf("len %d: Encode root = %s, %v; want %s", tc.n, root.Hex(), err, tc.want)
		}
	}
}

// TestB3sum checks the digest string against the b3sum command (Debian
// package b3sum). It skips when b3sum is missing, except in CI.
func TestB3sum(t *testing.T) {
	path, err := exec.LookPath("b3sum")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("b3sum not on PATH; CI must install the b3sum package")
		}
		t.Skip("b3sum not on PATH")
	}
	for i, n := range []int{0, 1, 1024, b3.GroupSize - 1, b3.GroupSize, b3.GroupSize + 1, 3*b3.GroupSize + 5, 1<<20 + 1} {
		data := randomBytes(n, uint64(i))
		cmd := exec.Command(path, "--no-names")
		cmd.Stdin = bytes.NewReader(data)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("b3sum: %v", err)
		}
		want := "blake3:" + strings.TrimSpace(string(out))
		if got := b3.Of(data).String(); got != want {
			t.Errorf("len %d: %s, b3sum says %s", n, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	good := b3.Of([]byte("x"))
	if got, err := b3.Parse(good.String()); err != nil || got != good {
		t.Fatalf("Parse(%s) = %v, %v", good, got, err)
	}
	h := good.Hex()
	for _, s := range []string{
		"", h, "blake3:", "blake3:" + h[:63], "blake3:" + h + "0", "BLAKE3:" + h,
		"blake3:" + strings.ToUpper(h), "blake3:" + h[:63] + "g", "sha256:" + h,
		" blake3:" + h, "blake3:" + h + "\n", "blake3: " + h[1:],
	} {
		if _, err := b3.Parse(s); err == nil {
			t.Errorf("Parse(%q) succeeded", s)
		}
	}
}

// groups is the number of GroupSize groups of a member, from the Bao layout.
func groups(size int) int { return (size + b3.GroupSize - 1) / b3.GroupSize }

var sizes = []int{0, 1, b3.GroupSize - 1, b3.GroupSize, b3.GroupSize + 1, 2 * b3.GroupSize, 3*b3.GroupSize + 5, 1<<20 + 1}

func TestEncodeVerify(t *testing.T) {
	for i, size := range sizes {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := randomBytes(size, uint64(100+i))
			root, ob, err := b3.Encode(bytes.NewReader(data), int64(size))
			if err != nil {
				t.Fatal(err)
			}
			if root != b3.Of(data) {
				t.Fatalf("Encode root %s != Of %s", root, b3.Of(data))
			}
			// Outboard layout: 8-byte little-endian length, then 64 bytes
			// (two chaining values) per parent node of a binary tree over
			// the groups.
			wantLen := 8
			if size > 0 {
				wantLen += 64 * (groups(size) - 1)
			}
			if len(ob) != wantLen || b3.OutboardSize(int64(size)) != wantLen {
				t.Fatalf("outboard %d bytes, OutboardSize %d, want %d", len(ob), b3.OutboardSize(int64(size)), wantLen)
			}
			if got := binary.LittleEndian.Uint64(ob); got != uint64(size) {
				t.Fatalf("outboard header says %d bytes", got)
			}
			// A reader that returns one byte at a time gives the same result.
			root2, ob2, err := b3.Encode(iotest.OneByteReader(bytes.NewReader(data)), int64(size))
			if err != nil || root2 != root || !bytes.Equal(ob2, ob) {
				t.Fatalf("one-byte reader: different result (%v)", err)
			}
			for _, block := range []int{b3.GroupSize, 2 * b3.GroupSize, 1 << 20, max(size, 1)} {
				for off := 0; off < size || off == 0; off += block {
					chunk := data[off:min(off+block, size)]
					if err := b3.Verify(root, ob, int64(size), int64(off), chunk); err != nil {
						t.Fatalf("block %d at %d: %v", block, off, err)
					}
				}
			}
		})
	}
}

// TestVerifyDetectsBadData flips single bytes of the data: the block that
// holds the byte fails, the other blocks still verify.
func TestVerifyDetectsBadData(t *testing.T) {
	for i, size := range sizes[1:] {
		data := randomBytes(size, uint64(200+i))
		root, ob, err := b3.Encode(bytes.NewReader(data), int64(size))
		if err != nil {
			t.Fatal(err)
		}
		positions := []int{0, size - 1, size / 2}
		for g := b3.GroupSize; g < size; g += b3.GroupSize {
			positions = append(positions, g-1, g)
		}
		for _, p := range positions {
			bad := bytes.Clone(data)
			bad[p] ^= 0x01
			if err := b3.Verify(root, ob, int64(size), 0, bad); !errors.Is(err, b3.ErrMismatch) {
				t.Errorf("size %d, byte %d flipped, whole member: %v, want ErrMismatch", size, p, err)
			}
			for off := 0; off < size; off += b3.GroupSize {
				end := min(off+b3.GroupSize, size)
				err := b3.Verify(root, ob, int64(size), int64(off), bad[off:end])
				if holds := off <= p && p < end; holds && !errors.Is(err, b3.ErrMismatch) {
					t.Errorf("size %d, byte %d flipped, block at %d: %v, want ErrMismatch", size, p, off, err)
				} else if !holds && err != nil {
					t.Errorf("size %d, byte %d flipped, untouched block at %d: %v", size, p, off, err)
				}
			}
		}
	}
}

// TestVerifyDetectsBadOutboard flips every byte of the outboard: a check
// of the whole member uses every node, so each flip must fail.
func TestVerifyDetectsBadOutboard(t *testing.T) {
	for i, size := range []int{1, b3.GroupSize + 1, 3*b3.GroupSize + 5} {
		data := randomBytes(size, uint64(300+i))
		root, ob, err := b3.Encode(bytes.NewReader(data), int64(size))
		if err != nil {
			t.Fatal(err)
		}
		for p := range ob {
			for _, mask := range []byte{0x01, 0x80} {
				bad := bytes.Clone(ob)
				bad[p] ^= mask
				if err := b3.Verify(root, bad, int64(size), 0, data); !errors.Is(err, b3.ErrMismatch) {
					t.Fatalf("size %d, outboard byte %d ^ %#x: %v, want ErrMismatch", size, p, mask, err)
				}
			}
		}
		for name, bad := range map[string][]byte{
			"nil":       nil,
			"truncated": ob[:len(ob)-1],
			"too long":  append(bytes.Clone(ob), 0),
			"header":    ob[:8],
		} {
			if size <= b3.GroupSize && name == "header" {
				continue // a one-group outboard is only the header
			}
			if err := b3.Verify(root, bad, int64(size), 0, data); err == nil {
				t.Errorf("size %d, %s outboard: verified", size, name)
			}
		}
	}
}

func TestVerifyRefusesBadRanges(t *testing.T) {
	const size = 3*b3.GroupSize + 5
	data := randomBytes(size, 400)
	root, ob, err := b3.Encode(bytes.NewReader(data), size)
	if err != nil {
		t.Fatal(err)
	}
	other := b3.Of([]byte("other"))
	for _, tc := range []struct {
		name      string
		d         b3.Sum
		size, off int64
		data      []byte
	}{
		{"wrong digest", other, size, 0, data},
		{"size one less", root, size - 1, 0, data[:size-1]},
		{"size one more", root, size + 1, 0, data},
		{"size one group less", root, size - b3.GroupSize, 0, data[:b3.GroupSize]},
		{"size one group more", root, size + b3.GroupSize, 0, data[:b3.GroupSize]},
		{"size zero", root, 0, 0, nil},
		{"offset 1", root, size, 1, data[1 : b3.GroupSize+1]},
		{"offset group-1", root, size, b3.GroupSize - 1, data[b3.GroupSize-1 : 2*b3.GroupSize-1]},
		{"negative offset", root, size, -b3.GroupSize, data[:b3.GroupSize]},
		{"unaligned end", root, size, 0, data[:100]},
		{"unaligned end, second group", root, size, b3.GroupSize, data[b3.GroupSize : b3.GroupSize+100]},
		{"beyond the end", root, size, 3 * b3.GroupSize, append(bytes.Clone(data[3*b3.GroupSize:]), 0)},
		{"data of another block", root, size, 0, data[b3.GroupSize : 2*b3.GroupSize]},
		{"offset near MaxInt64", root, size, math.MaxInt64 &^ (b3.GroupSize - 1), data[:b3.GroupSize]},
	} {
		if err := b3.Verify(tc.d, ob, tc.size, tc.off, tc.data); err == nil {
			t.Errorf("%s: verified", tc.name)
		}
	}
}

func TestEmptyMember(t *testing.T) {
	root, ob, err := b3.Encode(bytes.NewReader(nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	if root.Hex() != "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262" || len(ob) != 8 {
		t.Fatalf("empty member: root %s, outboard %x", root, ob)
	}
	if err := b3.Verify(root, ob, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := b3.Verify(b3.Of([]byte{0}), ob, 0, 0, nil); !errors.Is(err, b3.ErrMismatch) {
		t.Fatalf("empty member under another digest: %v", err)
	}
}

func TestEncodeWrongLength(t *testing.T) {
	for _, size := range []int{1, b3.GroupSize, b3.GroupSize + 1, 3*b3.GroupSize + 5} {
		data := randomBytes(size+1, 500)
		if _, _, err := b3.Encode(bytes.NewReader(data[:size-1]), int64(size)); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("size %d, one byte short: %v, want ErrUnexpectedEOF", size, err)
		}
		if _, _, err := b3.Encode(bytes.NewReader(data), int64(size)); err == nil {
			t.Errorf("size %d, one byte long: no error", size)
		}
	}
	if _, _, err := b3.Encode(bytes.NewReader([]byte{1}), 0); err == nil {
		t.Error("size 0, one byte: no error")
	}
	boom := errors.New("boom")
	if _, _, err := b3.Encode(iotest.ErrReader(boom), 10); !errors.Is(err, boom) {
		t.Errorf("reader error: %v, want it wrapped", err)
	}
}

func BenchmarkVerify(b *testing.B) {
	const size, block = 16 << 20, 1 << 20
	data := randomBytes(size, 600)
	root, ob, err := b3.Encode(bytes.NewReader(data), size)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(block)
	i := 0
	for b.Loop() {
		off := (i % (size / block)) * block
		if err := b3.Verify(root, ob, size, int64(off), data[off:off+block]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkEncode(b *testing.B) {
	const size = 16 << 20
	data := randomBytes(size, 700)
	b.SetBytes(size)
	for b.Loop() {
		if _, _, err := b3.Encode(bytes.NewReader(data), size); err != nil {
			b.Fatal(err)
		}
	}
}
