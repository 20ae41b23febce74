package verify_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// checkBoth runs Check and CheckReader (streamed in reads of varying
// size, with the size known and not) on the same input, and fails unless
// they agree.
func checkBoth(t *testing.T, name string, d verify.Digest, mb, table []byte) (*verify.Checked, error) {
	t.Helper()
	c, err := verify.Check(d, mb, table)
	for _, size := range []int64{int64(len(table)), -1} {
		sc, serr := verify.CheckReader(d, mb, iotest.HalfReader(bytes.NewReader(table)), size)
		if (err == nil) != (serr == nil) || errors.Is(err, verify.ErrInvalid) != errors.Is(serr, verify.ErrInvalid) {
			t.Fatalf("%s: Check error %v, CheckReader (size %d) %v", name, err, size, serr)
		}
		if err != nil {
			if err.Error() != serr.Error() {
				t.Errorf("%s: Check error %q, CheckReader (size %d) %q", name, err, size, serr)
			}
			continue
		}
		if !reflect.DeepEqual(c.Table.Members(), sc.Table.Members()) || !reflect.DeepEqual(c.Problems, sc.Problems) {
			t.Fatalf("%s: CheckReader (size %d) differs from Check", name, size)
		}
	}
	return c, err
}

// TestCheckReaderRefusesBadTable: a streamed table is refused for all
// that a table read whole is, with the same error, and a table that does
// not match the manifest's digest is reported as that first, whatever
// else is wrong with it.
func TestCheckReaderRefusesBadTable(t *testing.T) {
	defer verify.SetMinChunk(64)()
	ms := []verify.Member{casMember("a"), s3Member("b"), casMember("c")}
	m, mb, table := buildSnapshot(t, ms, nil)
	if c, err := checkBoth(t, "good", m.SnapshotID, mb, table); err != nil || len(c.Problems) != 0 {
		t.Fatalf("good table: %v, %v", c, err)
	}
	nl := bytes.IndexByte(table, '\n')
	for name, bad := range map[string][]byte{
		"line removed":    table[nl+1:],
		"line duplicated": append(bytes.Clone(table[:nl+1]), table...),
		"empty table":     nil,
		"not a table":     []byte("not json\n"),
	} {
		if _, err := checkBoth(t, name, m.SnapshotID, mb, bad); !errors.Is(err, verify.ErrInvalid) || !strings.Contains(err.Error(), "hashes to") {
			t.Errorf("%s: %v, want a digest mismatch", name, err)
		}
	}
	for i := range table {
		bad := bytes.Clone(table)
		bad[i] ^= 0x01
		if _, err := checkBoth(t, "flipped", m.SnapshotID, mb, bad); !errors.Is(err, verify.ErrInvalid) {
			t.Fatalf("table byte %d flipped: %v", i, err)
		}
	}
	short := table[nl+1:]
	wrong, wb, _ := buildSnapshot(t, ms, func(m *verify.Manifest) {
		m.Members = verify.MembersRef{URI: verify.MembersURI(verify.SHA256(short)), Count: 3, Bytes: 10}
	})
	if _, err := checkBoth(t, "count", wrong.SnapshotID, wb, short); !errors.Is(err, verify.ErrInvalid) || !strings.Contains(err.Error(), "manifest says 3") {
		t.Errorf("wrong count: %v", err)
	}
	junk := []byte("not json\n")
	bad, bb, _ := buildSnapshot(t, ms, func(m *verify.Manifest) {
		m.Members = verify.MembersRef{URI: verify.MembersURI(verify.SHA256(junk)), Count: 1}
	})
	if _, err := checkBoth(t, "malformed", bad.SnapshotID, bb, junk); !errors.Is(err, verify.ErrInvalid) || !strings.Contains(err.Error(), "line 1: not") {
		t.Errorf("malformed table with its digest: %v", err)
	}
	// A manifest that announces far more members than its table holds
	// does not make the check reserve memory for them.
	huge, hb, _ := buildSnapshot(t, ms, func(m *verify.Manifest) {
		m.Members = verify.MembersRef{URI: verify.MembersURI(verify.SHA256(table)), Count: 1 << 50, Bytes: 15}
	})
	if _, err := checkBoth(t, "huge count", huge.SnapshotID, hb, table); !errors.Is(err, verify.ErrInvalid) || !strings.Contains(err.Error(), "3 members") {
		t.Errorf("huge count: %v", err)
	}
}

// TestCheckReaderLarge streams tables of many chunks, with lines longer
// than a chunk, and a reader that fails.
func TestCheckReaderLarge(t *testing.T) {
	defer verify.SetMinChunk(4 << 10)()
	for _, k := range []verifytest.Kind{verifytest.S3, verifytest.CAS} {
		d, mb, table := verifytest.Table(3000, k, 3)
		c, err := checkBoth(t, "synthetic", d, mb, table)
		if err != nil || len(c.Problems) != 0 || !reflect.DeepEqual(c.Table.Members(), verifytest.Members(3000, k, 3)) {
			t.Fatalf("kind %d: %v", k, err)
		}
	}
	ms := []verify.Member{casMember("a"), casMember("b"), casMember("c")}
	ms[1].ID = strings.Repeat("long id ", 5000) // 40 KB: ten chunks
	m, mb, table := buildSnapshot(t, ms, nil)
	c, err := checkBoth(t, "long line", m.SnapshotID, mb, table)
	if err != nil || !reflect.DeepEqual(c.Table.Members(), ms) {
		t.Fatalf("long line: %v", err)
	}
	boom := errors.New("connection reset")
	r := io.MultiReader(bytes.NewReader(table[:len(table)/2]), iotest.ErrReader(boom))
	if c, err := verify.CheckReader(m.SnapshotID, mb, r, int64(len(table))); !errors.Is(err, boom) || c != nil {
		t.Errorf("failing reader: %v, %v", c, err)
	}
}

// opener is a store that streams: Open counts its calls, and serves
// openBytes instead of the blob when set (a corrupt cached copy).
type opener struct {
	store
	opens     int
	openBytes []byte
}

func (o *opener) Open(_ context.Context, key string) (io.ReadCloser, int64, error) {
	o.opens++
	b, ok := o.store[key]
	if !ok {
		return nil, 0, errors.New(key + ": not found")
	}
	if o.openBytes != nil {
		b = o.openBytes
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

// TestLoadStreams: Load streams the member table from an Opener; a
// stream that does not match its digest is read again whole through Get,
// which a cache answers from the store.
func TestLoadStreams(t *testing.T) {
	ctx := context.Background()
	ms := []verify.Member{casMember("a"), s3Member("b")}
	m, mb, table := buildSnapshot(t, ms, nil)
	td, _ := m.Members.Digest()
	o := &opener{store: store{verify.ManifestKey(m.SnapshotID): mb, verify.MembersKey(td): table}}
	s, err := verify.Load(ctx, o, m.SnapshotID)
	if err != nil || o.opens != 1 || !reflect.DeepEqual(s.Members(), ms) {
		t.Fatalf("Load = %v, %v after %d opens", s, err, o.opens)
	}
	o.openBytes = append(bytes.Clone(table), table...)
	if s, err := verify.Load(ctx, o, m.SnapshotID); err != nil || o.opens != 2 || !reflect.DeepEqual(s.Members(), ms) {
		t.Fatalf("corrupt stream: Load = %v, %v after %d opens", s, err, o.opens)
	}
	o.store[verify.MembersKey(td)] = o.openBytes
	if _, err := verify.Load(ctx, o, m.SnapshotID); !errors.Is(err, verify.ErrInvalid) {
		t.Fatalf("corrupt stream and copy: %v", err)
	}
}
