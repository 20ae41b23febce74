package derivations_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/derivations"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/derive"
)

func open(t *testing.T) (*localstore.Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st, dir
}

// record returns a complete record of transform v with output out.
func record(t *testing.T, v string, out verify.Digest) *derive.Record {
	t.Helper()
	r, err := derive.New([]derive.Input{{Name: "raw", Digest: verify.SHA256([]byte("raw"))}}, v, nil, []string{"sh", "t.sh"}, "dir")
	if err != nil {
		t.Fatal(err)
	}
	r.Output, r.Time = out, "2026-12-01T13:40:00Z"
	return r
}

func TestSaveAndFind(t *testing.T) {
	ctx := context.Background()
	st, _ := open(t)
	out := verify.SHA256([]byte("out"))
	r1 := record(t, "t@v1", out)
	if _, err := derivations.ByKey(ctx, st, r1.Key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ByKey before Save = %v, want ErrNotFound", err)
	}
	if rs, err := derivations.ByOutput(ctx, st, out); err != nil || len(rs) != 0 {
		t.Fatalf("ByOutput before Save = %v, %v; want none", rs, err)
	}
	saved, err := derivations.Save(ctx, st, r1)
	if err != nil || saved.Output != out {
		t.Fatalf("Save = %+v, %v", saved, err)
	}
	got, err := derivations.ByKey(ctx, st, r1.Key)
	if err != nil || got.Key != r1.Key || got.Output != out || got.Transform != "t@v1" {
		t.Fatalf("ByKey = %+v, %v", got, err)
	}

	// The same key with other bytes: the first record stays.
	drift := record(t, "t@v1", verify.SHA256([]byte("other")))
	drift.Time = "2026-12-02T00:00:00Z"
	saved, err = derivations.Save(ctx, st, drift)
	if err != nil || saved.Output != out || saved.Time != r1.Time {
		t.Fatalf("Save of a drifted output = %+v, %v; want the first record back", saved, err)
	}
	if rs, _ := derivations.ByOutput(ctx, st, drift.Output); len(rs) != 0 {
		t.Fatalf("the drifted output was indexed: %+v", rs)
	}

	// Another version giving the same bytes: two records for one output.
	r2 := record(t, "t@v2", out)
	if _, err := derivations.Save(ctx, st, r2); err != nil {
		t.Fatal(err)
	}
	rs, err := derivations.ByOutput(ctx, st, out)
	if err != nil || len(rs) != 2 || rs[0].Key > rs[1].Key {
		t.Fatalf("ByOutput = %d records, %v; want both, sorted by key", len(rs), err)
	}
	for _, r := range rs {
		if r.Key != r1.Key && r.Key != r2.Key {
			t.Errorf("ByOutput returned an unknown record %s", r.Key)
		}
	}

	// Find: a key names its record, an output every record of it.
	if rs, err := derivations.Find(ctx, st, r2.Key); err != nil || len(rs) != 1 || rs[0].Key != r2.Key {
		t.Errorf("Find(key) = %v, %v; want the one record", rs, err)
	}
	if rs, err := derivations.Find(ctx, st, out); err != nil || len(rs) != 2 {
		t.Errorf("Find(output) = %d records, %v; want 2", len(rs), err)
	}
	if _, err := derivations.Find(ctx, st, verify.SHA256([]byte("nothing"))); !errors.Is(err, derivations.ErrNoRecord) {
		t.Errorf("Find(unknown) = %v, want ErrNoRecord", err)
	}
}

// TestSaveRace: of many derivations of one key racing with different
// outputs, one record wins and every Save returns it.
func TestSaveRace(t *testing.T) {
	ctx := context.Background()
	st, _ := open(t)
	var wg sync.WaitGroup
	got := make([]*derive.Record, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Go(func() {
			got[i], errs[i] = derivations.Save(ctx, st, record(t, "t@v1", verify.SHA256([]byte{byte(i)})))
		})
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got[i].Output != got[0].Output {
			t.Fatalf("Save %d returned output %s, Save 0 %s: two records for one key", i, got[i].Output, got[0].Output)
		}
	}
}

func TestTamperedRecords(t *testing.T) {
	ctx := context.Background()
	out := verify.SHA256([]byte("out"))
	cases := map[string]func(t *testing.T, dir string, r *derive.Record){
		"record edited": func(t *testing.T, dir string, r *derive.Record) {
			edit(t, filepath.Join(dir, derivations.KeyOf(r.Key)), "t@v1", "t@v9")
		},
		"record of another key": func(t *testing.T, dir string, r *derive.Record) {
			other := record(t, "t@v2", out)
			b, _ := other.Encode()
			write(t, filepath.Join(dir, derivations.KeyOf(r.Key)), b)
		},
		"index edited": func(t *testing.T, dir string, r *derive.Record) {
			edit(t, filepath.Join(dir, "derivations/outputs/sha256", out.Hex(), r.Key.Hex()), "t@v1", "t@v9")
		},
		"index time edited": func(t *testing.T, dir string, r *derive.Record) {
			edit(t, filepath.Join(dir, "derivations/outputs/sha256", out.Hex(), r.Key.Hex()), "2026-12-01T13:40:00Z", "2026-12-01T13:40:01Z")
		},
		"index entry under another output": func(t *testing.T, dir string, r *derive.Record) {
			b, _ := os.ReadFile(filepath.Join(dir, derivations.KeyOf(r.Key)))
			write(t, filepath.Join(dir, "derivations/outputs/sha256", out.Hex(), strings.Repeat("0", 64)), b)
		},
	}
	for name, tamper := range cases {
		t.Run(name, func(t *testing.T) {
			st, dir := open(t)
			r := record(t, "t@v1", out)
			if _, err := derivations.Save(ctx, st, r); err != nil {
				t.Fatal(err)
			}
			tamper(t, dir, r)
			_, err1 := derivations.ByKey(ctx, st, r.Key)
			_, err2 := derivations.ByOutput(ctx, st, out)
			if !errors.Is(err1, derive.ErrInvalid) && !errors.Is(err2, derive.ErrInvalid) {
				t.Fatalf("tampering went unnoticed: ByKey %v, ByOutput %v", err1, err2)
			}
		})
	}
}

// blobsOnly is a store that can neither create exclusively nor list.
type blobsOnly struct{ store.Blobs }

func TestStoreWithoutCreate(t *testing.T) {
	st, _ := open(t)
	_, err := derivations.Save(context.Background(), blobsOnly{st}, record(t, "t@v1", verify.SHA256(nil)))
	if err == nil || !strings.Contains(err.Error(), "cannot keep derivation records") {
		t.Fatalf("Save on a store without Create = %v", err)
	}
}

func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s does not hold %q", path, old)
	}
	write(t, path, []byte(strings.Replace(string(b), old, new, 1)))
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
