package integration

// The design's fault injections for admission, through the pinfs binary on
// versitygw. A key overwritten after the pin is TestMountServesPinnedBytes
// (pinFixture overwrites train/mid.bin after pinning); a tampered manifest
// or report after signing, and the gate race, have their own files.

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/integration/fusetest"
	"github.com/pinfs/pinfs/integration/s3test"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// change is one write the churn made: a new current version of key, or
// (version "") a delete marker.
type change struct{ key, version string }

// churn changes keys under data/ds/ one at a time and records every
// change in the order the server applied it, so the states the prefix
// went through are known exactly: state, then state with ops[0] applied,
// and so on. It adds new keys, overwrites and deletes original ones.
type churn struct {
	c     *s3.Client
	state map[string]string // key -> current version id
	orig  []string          // the keys put before the pins, sorted
	ops   []change
}

// step makes change number i (adds, overwrites and deletes in turn, spread
// over the prefix so they land on every listing page).
func (ch *churn) step(ctx context.Context, i int) error {
	var key, ver string
	var err error
	switch i % 3 {
	case 0:
		key = fmt.Sprintf("ds/d%02d/added-%05d", i%13, i)
	case 1:
		key = ch.orig[(i*7919)%len(ch.orig)]
	case 2:
		key = ch.orig[(i*104729+1)%len(ch.orig)]
		_, err = ch.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("data"), Key: aws.String(key)})
	}
	if i%3 != 2 {
		var out *s3.PutObjectOutput
		out, err = ch.c.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String("data"), Key: aws.String(key), Body: strings.NewReader(fmt.Sprintf("change %d", i)),
		})
		if err == nil {
			ver = aws.ToString(out.VersionId)
		}
	}
	if err != nil {
		return fmt.Errorf("change %d of %s: %w", i, key, err)
	}
	ch.ops = append(ch.ops, change{key, ver})
	return nil
}

// run makes changes until stop is closed or max changes were made.
func (ch *churn) run(stop <-chan struct{}, max int) error {
	for i := len(ch.ops); len(ch.ops) < max; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := ch.step(context.Background(), i); err != nil {
			return err
		}
	}
	return nil
}

// apply returns the state after ops were applied to start.
func apply(start map[string]string, ops []change) map[string]string {
	s := maps.Clone(start)
	for _, o := range ops {
		if o.version == "" {
			delete(s, o.key)
		} else {
			s[o.key] = o.version
		}
	}
	return s
}

// heldAtOnce reports whether pinned (key -> version) equals the prefix in
// one of the states it went through: start, or start after each of ops.
func heldAtOnce(start map[string]string, ops []change, pinned map[string]string) bool {
	differ := 0 // keys whose version in the state differs from pinned
	for k, v := range start {
		if pinned[k] != v {
			differ++
		}
	}
	for k := range pinned {
		if _, ok := start[k]; !ok {
			differ++
		}
	}
	s := maps.Clone(start)
	for _, o := range ops {
		if differ == 0 {
			return true
		}
		before := s[o.key] != pinned[o.key]
		if o.version == "" {
			delete(s, o.key)
		} else {
			s[o.key] = o.version
		}
		after := s[o.key] != pinned[o.key]
		switch {
		case before && !after:
			differ--
		case !before && after:
			differ++
		}
	}
	return differ == 0
}

// countKeys counts the objects under prefix in bucket.
func countKeys(t testing.TB, c *s3.Client, bucket, prefix string) int {
	t.Helper()
	n := 0
	pages := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Contents)
	}
	return n
}

// pinnedVersions lists snapshot d with pinfs ls --json: S3 key -> version.
func pinnedVersions(t testing.TB, env []string, d, st string) map[string]string {
	t.Helper()
	ms, err := verify.ParseMembers([]byte(mustPinfs(t, env, "ls", d, "--store", st, "--json").stdout))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range ms {
		out[m.S3.Key] = m.S3.VersionID
	}
	return out
}

// TestPinUnderConcurrentWrites pins a prefix of several listing pages while
// keys are added, overwritten and deleted. Every pin either succeeds with
// exactly the versions the prefix held at one moment, or fails with one
// line naming keys that changed, and writes no manifest. A pin with a
// writer busy all along must fail; a pin after the writer stopped must
// succeed with the final state; pins racing a short burst may do either.
func TestPinUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	s := s3test.Start(t)
	env := s.Env()
	s.CreateBucket(t, "data", true)
	s.CreateBucket(t, "store", true)
	c := s.Client(t)
	ch := &churn{c: c, state: map[string]string{}}
	const n = 2100 // three ListObjectVersions pages of 1000
	var mu sync.Mutex
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			key := fmt.Sprintf("ds/d%02d/f%05d", i%13, i)
			out, err := c.PutObject(context.Background(), &s3.PutObjectInput{
				Bucket: aws.String("data"), Key: aws.String(key), Body: strings.NewReader("x"),
			})
			if err == nil {
				mu.Lock()
				ch.state[key] = aws.ToString(out.VersionId)
				mu.Unlock()
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	ch.orig = slices.Sorted(maps.Keys(ch.state))
	const st = "s3://store/p"
	const refusal = "pinfs pin: s3://data/ds/: changed while it was pinned: "

	// pinRound pins while the churn makes up to max more changes (or runs
	// until the pin ends), checks the invariant and returns the exit code.
	pinRound := func(t *testing.T, max int) int {
		start, from := apply(ch.state, ch.ops), len(ch.ops)
		manifests := countKeys(t, c, "store", "p/manifests/")
		stop, done := make(chan struct{}), make(chan error, 1)
		go func() { done <- ch.run(stop, from+max) }()
		r := pinfs(t, env, "pin", "s3://data/ds/", "--store", st)
		close(stop)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		ops := ch.ops[from:]
		t.Logf("pin exit %d with %d concurrent changes: %s", r.code, len(ops), r.stderr)
		switch r.code {
		case 0:
			if !heldAtOnce(start, ops, pinnedVersions(t, env, r.lastLine(), st)) {
				t.Fatalf("the pin %s matches none of the %d states the prefix went through", r.lastLine(), len(ops)+1)
			}
		case 1:
			msg := strings.TrimSuffix(r.stderr, "\n")
			named, pre := strings.CutPrefix(msg, refusal)
			named, suf := strings.CutSuffix(named, "; pin again")
			if !pre || !suf || strings.Contains(msg, "\n") {
				t.Fatalf("refusal is not the one line naming the changes: %v", r)
			}
			if i := strings.LastIndex(named, " and "); i >= 0 {
				named = named[:i]
			}
			touched := map[string]bool{}
			for _, o := range ops {
				touched[o.key] = true
			}
			for _, e := range strings.Split(named, ", ") {
				key := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(e, "added "), "deleted "), "new version of ")
				if !touched[key] {
					t.Errorf("refusal names %q, which did not change during the pin: %s", e, msg)
				}
			}
			if got := countKeys(t, c, "store", "p/manifests/"); got != manifests {
				t.Errorf("a refused pin wrote a manifest: %d manifests, %d before", got, manifests)
			}
		default:
			t.Fatalf("pin under concurrent writes: %v", r)
		}
		return r.code
	}

	t.Run("writer busy throughout", func(t *testing.T) {
		if code := pinRound(t, 1<<30); code != 1 {
			t.Fatalf("a pin with changes throughout its hashing succeeded")
		}
	})
	// At about 150 changes a second, bursts of these sizes end before,
	// during or after the first listing.
	for _, max := range []int{50, 200, 600} {
		t.Run(fmt.Sprintf("burst of %d", max), func(t *testing.T) { pinRound(t, max) })
	}
	t.Run("writer stopped", func(t *testing.T) {
		r := mustPinfs(t, env, "pin", "s3://data/ds/", "--store", st)
		if got, want := pinnedVersions(t, env, r.lastLine(), st), apply(ch.state, ch.ops); !maps.Equal(got, want) {
			t.Fatalf("pin of a quiet prefix: %d members, the prefix holds %d", len(got), len(want))
		}
	})
}

// blobStore is a store of one kind as a test reaches into it: its --store
// URL, and reading and replacing a blob at a store key.
type blobStore struct {
	url string
	get func(key string) []byte
	put func(key string, b []byte)
}

// freshStores returns a new, empty S3 store (under a prefix named name in
// the bucket "store") and a new local store.
func freshStores(t *testing.T, s *s3test.Server, name string) map[string]blobStore {
	local := t.TempDir()
	path := func(key string) string { return filepath.Join(local, filepath.FromSlash(key)) }
	return map[string]blobStore{
		"s3": {"s3://store/" + name,
			func(key string) []byte { return s.Get(t, "store", name+"/"+key, "") },
			func(key string, b []byte) { s.Put(t, "store", name+"/"+key, b) }},
		"local": {local,
			func(key string) []byte {
				b, err := os.ReadFile(path(key))
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			func(key string, b []byte) {
				if err := os.MkdirAll(filepath.Dir(path(key)), 0o755); err != nil {
					t.Fatal(err)
				}
				os.Chmod(path(key), 0o644) // the store writes its blobs read-only
				if err := os.WriteFile(path(key), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}},
	}
}

// putHandmade stores a member table of ms and a manifest over it with put,
// digests right, and returns the manifest digest.
func putHandmade(t testing.TB, put func(string, []byte), ms []verify.Member) string {
	t.Helper()
	table, err := verify.EncodeMembers(ms)
	if err != nil {
		t.Fatal(err)
	}
	var bytes int64
	for _, m := range ms {
		bytes += m.Size
	}
	td := verify.SHA256(table)
	m := &verify.Manifest{Purpose: "faults", Members: verify.MembersRef{URI: verify.MembersURI(td), Count: int64(len(ms)), Bytes: bytes}}
	doc, err := verify.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	put(verify.MembersKey(td), table)
	put(verify.ManifestKey(m.SnapshotID), doc)
	return m.SnapshotID.String()
}

// wantMountRefused runs pinfs mount --foreground of d from st and wants
// exit 1 with every string of want in the output, and no mount.
func wantMountRefused(t testing.TB, env []string, d, st string, want ...string) {
	t.Helper()
	dir, work := t.TempDir(), t.TempDir()
	t.Cleanup(func() { fusetest.ForceUnmount(t, dir) })
	wantExit(t, env, 1, want, "mount", d, dir, "--store", st, "--cache-dir", filepath.Join(work, "cache"),
		"--run-record", filepath.Join(work, "run.jsonl"), "--foreground")
	if fusetest.Mounted(dir) {
		t.Errorf("pinfs mount of %s refused but mounted", d)
	}
}

// TestIDInTwoSplitsIsRefused: a member table (digests right) in which one
// id is both a train and a val member is refused by verify, ls and mount,
// naming the id, from an S3 and a local store.
func TestIDInTwoSplitsIsRefused(t *testing.T) {
	t.Parallel()
	s := s3test.Start(t)
	env := s.Env()
	s.CreateBucket(t, "data", true)
	s.CreateBucket(t, "store", true)
	member := func(id, path, split string, content []byte) verify.Member {
		v := s.Put(t, "data", "ds/"+path, content)
		return verify.Member{ID: id, Path: path, Split: split, Size: int64(len(content)), Digest: b3.Of(content).String(),
			S3: &verify.S3Source{Bucket: "data", Key: "ds/" + path, VersionID: v}}
	}
	ms := []verify.Member{ // sorted by path, as a member table must be
		member("rec-0009", "train/shard-1/rec-0009.json", "train", []byte(`{"q":"b"}`)),
		member("rec-0417", "train/shard-3/rec-0417.json", "train", []byte(`{"q":"a"}`)),
		member("rec-0417", "val/rec-0417.json", "val", []byte(`{"q":"a"}`)),
	}
	for kind, st := range freshStores(t, s, "splits") {
		t.Run(kind, func(t *testing.T) {
			d := putHandmade(t, st.put, ms)
			wantExit(t, env, 1, []string{"duplicate_id", "rec-0417", `split "train"`, `"val"`, "verify: FAILED"}, "verify", d, "--store", st.url)
			r := wantExit(t, env, 1, []string{"rec-0417", "invalid snapshot"}, "ls", d, "--store", st.url)
			if r.stdout != "" {
				t.Errorf("ls of a refused snapshot printed members:\n%s", r.stdout)
			}
			wantMountRefused(t, env, d, st.url, "rec-0417")
		})
	}
}

// TestTruncatedMemberTableIsRefused: a pinned snapshot whose member table
// lost its last line, or was cut in the middle of it, while the manifest
// stayed, is refused by verify, ls and mount, in an S3 and a local store.
func TestTruncatedMemberTableIsRefused(t *testing.T) {
	t.Parallel()
	s := s3test.Start(t)
	env := s.Env()
	dataset(t, s)
	for _, tc := range []struct {
		name string
		cut  func([]byte) []byte
	}{
		{"last line dropped", func(b []byte) []byte {
			return b[:bytes.LastIndexByte(bytes.TrimSuffix(b, []byte("\n")), '\n')+1]
		}},
		{"cut mid-line", func(b []byte) []byte { return b[:len(b)-20] }},
	} {
		for kind, st := range freshStores(t, s, strings.ReplaceAll(tc.name, " ", "-")) {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				d := mustPinfs(t, env, "pin", "s3://data/ds/", "--store", st.url).lastLine()
				md, err := verify.ParseDigest(d)
				if err != nil {
					t.Fatal(err)
				}
				m, err := verify.ParseManifest(md, st.get(verify.ManifestKey(md)))
				if err != nil {
					t.Fatal(err)
				}
				td, _ := m.Members.Digest()
				table := st.get(verify.MembersKey(td))
				if n := bytes.Count(table, []byte("\n")); n != 4 {
					t.Fatalf("test setup: the pinned table has %d lines, want 4", n)
				}
				st.put(verify.MembersKey(td), tc.cut(table))
				wantExit(t, env, 1, []string{"invalid snapshot", td.String()}, "verify", d, "--store", st.url)
				wantExit(t, env, 1, []string{"invalid snapshot"}, "ls", d, "--store", st.url)
				wantMountRefused(t, env, d, st.url, "invalid snapshot")
			})
		}
	}
}

// TestPinRefusesTransformTag: a --transform that is a tag, not a digest,
// is a usage error, on one line, and pins nothing.
func TestPinRefusesTransformTag(t *testing.T) {
	t.Parallel()
	src, st := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := wantExit(t, nil, 2, []string{"--transform registry/harvest:v1: not pinned by a digest", "same tag, new digest"},
		"pin", src, "--store", st, "--transform", "registry/harvest:v1")
	if strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
		t.Errorf("refusal is not one line: %v", r)
	}
	mustPinfs(t, nil, "pin", src, "--store", st, "--transform", "registry/harvest@"+strings.Repeat("a", 40))
}
