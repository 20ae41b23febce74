package versions

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify/b3"
)

// entry returns a made-up entry of key at version.
func entry(key, version string, size int64) Entry {
	return Entry{Key: key, VersionID: version, Size: size, Digest: b3.Of([]byte(key + "@" + version))}
}

// sample returns n entries with keys that share prefixes, several versions
// of some keys, and sizes of every uvarint length.
func sample(n int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		es[i] = entry(fmt.Sprintf("data/part-%03d/file-%05d.parquet", i/100, i/3), fmt.Sprintf("v%d", i%3), int64(i%7)<<(i%47))
	}
	return es
}

func TestSegmentRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 2, 1000} {
		es := sample(n)
		b, err := Encode("bucket", es)
		if err != nil {
			t.Fatal(err)
		}
		bucket, got, err := Parse(b)
		if err != nil {
			t.Fatalf("%d entries: %v", n, err)
		}
		want := slices.Clone(es)
		slices.SortFunc(want, func(a, b Entry) int { return compare(&a, &b) })
		if bucket != "bucket" || !slices.Equal(got, want) {
			t.Fatalf("%d entries: Parse gave bucket %q and %d entries, want %d", n, bucket, len(got), len(want))
		}
	}
}

// TestSegmentCompact: shared key prefixes make a segment much smaller than
// the keys themselves.
func TestSegmentCompact(t *testing.T) {
	es := sample(1000)
	b, err := Encode("bucket", es)
	if err != nil {
		t.Fatal(err)
	}
	raw := 0
	for _, e := range es {
		raw += len(e.Key) + len(e.VersionID) + 8 + 32
	}
	if len(b) >= raw*3/4 {
		t.Fatalf("segment of %d bytes for %d bytes of entries", len(b), raw)
	}
}

func TestEncodeCanonical(t *testing.T) {
	es := sample(300)
	want, err := Encode("b", es)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		shuffled := slices.Clone(es)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		shuffled = append(shuffled, shuffled[:50]...) // identical duplicates
		got, err := Encode("b", shuffled)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("Encode depends on the order of its entries")
		}
	}
}

func TestEncodeRefuses(t *testing.T) {
	ok := entry("k", "v", 1)
	other := ok
	other.Size = 2
	otherDigest := ok
	otherDigest.Digest[0] ^= 1
	for name, tc := range map[string]struct {
		bucket string
		es     []Entry
	}{
		"no bucket":           {"", []Entry{ok}},
		"long bucket":         {strings.Repeat("b", 256), []Entry{ok}},
		"two sizes":           {"b", []Entry{ok, other}},
		"two digests":         {"b", []Entry{otherDigest, entry("a", "v", 1), ok}},
		"empty key":           {"b", []Entry{entry("", "v", 1)}},
		"long key":            {"b", []Entry{entry(strings.Repeat("k", 1025), "v", 1)}},
		"empty version":       {"b", []Entry{entry("k", "", 1)}},
		"long version":        {"b", []Entry{entry("k", strings.Repeat("v", 1025), 1)}},
		"null version":        {"b", []Entry{entry("k", "null", 1)}},
		"negative size":       {"b", []Entry{entry("k", "v", -1)}},
		"size beyond 1 << 50": {"b", []Entry{entry("k", "v", 1<<50+1)}},
	} {
		if _, err := Encode(tc.bucket, tc.es); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
	if _, err := Encode("b", []Entry{entry(strings.Repeat("k", 1024), strings.Repeat("v", 1024), 1<<50)}); err != nil {
		t.Errorf("entry at the bounds: %v", err)
	}
}

// segment builds a segment by hand: header then raw entries.
func segment(bucket string, count int, entries ...[]byte) []byte {
	b := []byte(magic)
	b = appendString(b, bucket)
	b = binary.AppendUvarint(b, uint64(count))
	for _, e := range entries {
		b = append(b, e...)
	}
	return b
}

// raw encodes one entry with the given shared count and suffix.
func raw(shared int, suffix, version string, size uint64) []byte {
	b := binary.AppendUvarint(nil, uint64(shared))
	b = appendString(b, suffix)
	b = appendString(b, version)
	b = binary.AppendUvarint(b, size)
	return append(b, make([]byte, 32)...)
}

func TestParseRefuses(t *testing.T) {
	good, err := Encode("b", sample(20))
	if err != nil {
		t.Fatal(err)
	}
	overlong := []byte(magic)
	overlong = append(overlong, 0x81, 0x00, 'b', 0) // bucket length 1 as two bytes
	for name, b := range map[string][]byte{
		"empty":               nil,
		"bad magic":           append([]byte("pinfs.versions.v2\n"), good[len(magic):]...),
		"trailing bytes":      append(slices.Clone(good), 0),
		"no bucket":           segment("", 0),
		"count beyond bound":  segment("b", 1<<26+1),
		"count beyond bytes":  segment("b", 2, raw(0, "a", "v", 1)),
		"unsorted keys":       segment("b", 2, raw(0, "b", "v", 1), raw(0, "a", "v", 1)),
		"unsorted versions":   segment("b", 2, raw(0, "a", "w", 1), raw(1, "", "v", 1)),
		"duplicate":           segment("b", 2, raw(0, "a", "v", 1), raw(1, "", "v", 1)),
		"duplicate, 2 sizes":  segment("b", 2, raw(0, "a", "v", 1), raw(1, "", "v", 2)),
		"shared too short":    segment("b", 2, raw(0, "ab", "v", 1), raw(0, "ac", "v", 1)),
		"shared beyond key":   segment("b", 2, raw(0, "ab", "v", 1), raw(3, "c", "v", 1)),
		"shared in first":     segment("b", 1, raw(1, "a", "v", 1)),
		"empty key":           segment("b", 1, raw(0, "", "v", 1)),
		"too long key":        segment("b", 1, raw(0, strings.Repeat("k", 1025), "v", 1)),
		"too long key shared": segment("b", 2, raw(0, strings.Repeat("k", 1024), "v", 1), raw(1024, "k", "v", 1)),
		"too long version":    segment("b", 1, raw(0, "k", strings.Repeat("v", 1025), 1)),
		"empty version":       segment("b", 1, raw(0, "k", "", 1)),
		"null version":        segment("b", 1, raw(0, "k", "null", 1)),
		"size beyond bound":   segment("b", 1, raw(0, "k", "v", 1<<50+1)),
		"overlong uvarint":    overlong,
	} {
		if _, _, err := Parse(b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Parse = %v, want ErrInvalid", name, err)
		}
	}
}

// TestParseTruncated cuts a valid segment at every offset.
func TestParseTruncated(t *testing.T) {
	good, err := Encode("bucket", sample(10))
	if err != nil {
		t.Fatal(err)
	}
	for i := range good {
		if _, _, err := Parse(good[:i]); !errors.Is(err, ErrInvalid) {
			t.Fatalf("cut at %d of %d: Parse = %v, want ErrInvalid", i, len(good), err)
		}
	}
}

// FuzzParse: whatever Parse accepts, Encode gives back byte for byte.
func FuzzParse(f *testing.F) {
	for _, n := range []int{0, 1, 7} {
		b, err := Encode("bucket", sample(n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(segment("b", 2, raw(0, "ab", "v", 1), raw(1, "c", "v", 1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		bucket, es, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse error %v does not wrap ErrInvalid", err)
			}
			return
		}
		again, err := Encode(bucket, es)
		if err != nil {
			t.Fatalf("Encode of what Parse accepted: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("Parse then Encode: %x, want %x", again, b)
		}
	})
}
