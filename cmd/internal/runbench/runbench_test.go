package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/cmd/internal/runs"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// emptyBLAKE3 is the BLAKE3 of no bytes, the digest an empty member must have.
const emptyBLAKE3 = "blake3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"

// snapshot writes a snapshot of n CAS members (sizes 0 to ~300 KiB) into
// a new local store and returns the store dir, digest and total bytes.
func snapshot(t *testing.T, n int) (string, verify.Digest, int64) {
	t.Helper()
	ms := make([]verify.Member, n)
	for i := range ms {
		p := fmt.Sprintf("train/sample-%04d.bin", i)
		size, d := int64(i%7)*45_000, fmt.Sprintf("blake3:%064x", i+1)
		if size == 0 {
			d = emptyBLAKE3
		}
		ms[i] = verify.Member{ID: p, Path: p, Split: "train", Size: size, Digest: d, CAS: d}
	}
	dir := t.TempDir()
	st, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	d, total, _, err := verifytest.PutSnapshot(context.Background(), st, ms, verify.Manifest{
		Sources:     []verify.Source{{ID: "test", URI: "dir:test"}},
		SplitPolicy: "dir:train",
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir, d, total
}

// runbench runs the command with args and decodes what it prints.
func runbench(t *testing.T, args ...string) recordStats {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("runbench %v: %v\n%s", args, err, errOut.String())
	}
	var st recordStats
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("runbench printed %q: %v", out.String(), err)
	}
	return st
}

func TestFullRunConsumesEveryMember(t *testing.T) {
	const n = 500
	store, d, total := snapshot(t, n)
	record := filepath.Join(t.TempDir(), "runs.jsonl")
	st := runbench(t, "full", "--record", record, "--store", store, "--digest", string(d), "--run-id", "all", "--deltas", "7")
	if st.Runs != 1 || st.Events != 7 || st.Members != n || st.Bytes != total {
		t.Fatalf("stats %+v, want 1 run, 7 events, %d members, %d bytes", st, n, total)
	}
	ctx := context.Background()
	run, err := runrecord.ReadRun(ctx, runrecord.Source{URL: record}, "all")
	if err != nil {
		t.Fatal(err)
	}
	ls, _ := localstore.New(store)
	snap, err := verify.Load(ctx, ls, d)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := runs.Show(run, snap.Table(), time.Now(), runrecord.LocalLiveness, false)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Consumed
	if rep.State != runrecord.StateEnded || c.MembersOpened != n || c.MembersFull != n || c.Bytes != total {
		t.Fatalf("show: state %s, %d opened, %d full, %d bytes; want ended, %d, %d, %d", rep.State, c.MembersOpened, c.MembersFull, c.Bytes, n, n, total)
	}
}

func TestSmallRunsAreListed(t *testing.T) {
	store, d, _ := snapshot(t, 300)
	record := filepath.Join(t.TempDir(), "runs.jsonl")
	st := runbench(t, "small", "--record", record, "--store", store, "--digest", string(d),
		"--run-id", "s", "--runs", "12", "--members", "40", "--jobs", "3")
	if st.Runs != 12 || st.Integrity[runrecord.Mismatch] != 1 || st.Integrity[runrecord.FetchFailed] != 1 {
		t.Fatalf("stats %+v, want 12 runs, 1 mismatch (run 3), 1 fetch_failed (run 7)", st)
	}
	infos, err := runrecord.List(context.Background(), runrecord.Source{URL: record}, time.Now(), runrecord.LocalLiveness)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 12 {
		t.Fatalf("listed %d runs, want 12", len(infos))
	}
	for _, r := range infos {
		want := int64(0)
		if r.RunID == "s-003" {
			want = 1
		}
		if r.State != runrecord.StateEnded || r.Integrity[runrecord.Mismatch] != want {
			t.Errorf("run %s: state %s, %d mismatches; want ended, %d", r.RunID, r.State, r.Integrity[runrecord.Mismatch], want)
		}
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"both"}, {"full", "--record", "x"}, {"full", "--record", "x", "--store", "y", "--digest", "nope"}} {
		err := run(context.Background(), args, io.Discard, io.Discard)
		if _, ok := err.(usageError); !ok {
			t.Errorf("runbench %v: %v, want a usage error", args, err)
		}
	}
}
