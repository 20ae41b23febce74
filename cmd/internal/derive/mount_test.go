package derive

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/lineage"
	"github.com/pinfs/pinfs/cmd/internal/mount"
	"github.com/pinfs/pinfs/integration/fusetest"
	"github.com/pinfs/pinfs/store/derivations"
	"github.com/pinfs/pinfs/verify"
)

// TestDeriveMounts runs a derivation with its inputs mounted for real
// (FUSE, in-process): the command finds each input read-only at
// $PINFS_INPUT_<NAME>, copies one into $PINFS_OUTPUT, and the output
// holds the same members; the mounts are gone afterwards and so is the
// scratch dir. A second input that does not exist fails the run before
// the command runs, with every mount undone.
func TestDeriveMounts(t *testing.T) {
	fusetest.Require(t)
	ctx := context.Background()
	f := newFixture(t)
	cache := filepath.Join(t.TempDir(), "cache")
	if err := mount.PrepareCacheDir(cache); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	f.rn.mount = nil // FUSE
	var cmdOut strings.Builder
	f.rn.Output = &cmdOut
	f.rn.CacheDir, f.rn.RunRecord = cache, filepath.Join(cache, "runs.jsonl")
	f.rn.Log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var mountpoints []string
	t.Cleanup(func() {
		for _, mp := range mountpoints {
			fusetest.ForceUnmount(t, mp)
		}
	})
	f.setCode(t, `set -ex
echo "$PINFS_INPUT_raw" > `+f.runs+`.mountpoint
grep -q " $PINFS_INPUT_raw fuse.pinfs ro," /proc/self/mounts
if touch "$PINFS_INPUT_raw"/new 2>/dev/null; then echo "input is writable" >&2; exit 7; fi
test "$PINFS_INPUT_RAW" = "$PINFS_INPUT_raw"
test "$PINFS_PARAM_MIN" = 5
cp -r "$PINFS_INPUT_raw"/. "$PINFS_OUTPUT"/`)
	res, err := Derive(ctx, f.rn, f.record(t), false, now)
	if b, _ := os.ReadFile(f.runs + ".mountpoint"); len(b) > 0 {
		mountpoints = append(mountpoints, strings.TrimSpace(string(b)))
	}
	if err != nil {
		t.Fatalf("derive: %v (log: %s; output: %s)", err, logs.String(), cmdOut.String())
	}
	in, err := verify.Load(ctx, f.st, f.input)
	if err != nil {
		t.Fatal(err)
	}
	out, err := verify.Load(ctx, f.st, res.Record.Output)
	if err != nil {
		t.Fatal(err)
	}
	df := lineage.Compare(in.Digest(), out.Digest(), in.Table(), out.Table())
	if n := len(df.Added) + len(df.Removed) + len(df.Changed) + len(df.Moved); n != 0 || out.Table().Len() != 3 {
		t.Errorf("the output differs from the input it copied: %v", df.Counts)
	}
	if _, err := derivations.ByKey(ctx, f.st, res.Record.Key); err != nil {
		t.Errorf("no record: %v", err)
	}
	for _, mp := range mountpoints {
		if fusetest.Mounted(mp) {
			t.Errorf("%s is still mounted after the derivation", mp)
		}
	}
	f.checkWorkRemoved(t)
	if err := Check(ctx, f.rn, res.Record); err != nil {
		t.Errorf("check: %v", err)
	}

	// An input that is not in the store: nothing runs, nothing stays mounted.
	r := f.record(t)
	r.Inputs = append(r.Inputs, r.Inputs[0])
	r.Inputs[1].Name, r.Inputs[1].Digest = "zz", verify.Digest("sha256:"+strings.Repeat("0", 64))
	runs := f.runCount(t)
	_, err = f.rn.Run(ctx, r)
	if err == nil || !strings.HasPrefix(err.Error(), "input zz: no manifest sha256:000") {
		t.Errorf("run with a missing input: %v, want input zz: no manifest … in store …", err)
	}
	if f.runCount(t) != runs {
		t.Errorf("the command ran although an input could not be mounted")
	}
	f.checkWorkRemoved(t)
}
