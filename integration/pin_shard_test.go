package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/integration/faultproxy"
	"github.com/pinfs/pinfs/integration/s3test"
	pinversions "github.com/pinfs/pinfs/store/versions"
)

// shardStatsRE is the summary line of one shard of a sharded pin.
var shardStatsRE = regexp.MustCompile(`(?m)^pinfs pin: shard (\d+) of (\d+): (\d+) members: (\d+) reused, (\d+) read;`)

// putObjects puts objects (key -> bytes) into bucket, 16 at a time.
func putObjects(t *testing.T, s *s3test.Server, bucket string, objs map[string][]byte) {
	t.Helper()
	c := s.Client(t)
	errs := make(chan error, len(objs))
	sem := make(chan struct{}, 16)
	for k, v := range objs {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader(v)})
			errs <- err
		}()
	}
	for range objs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// shardDataset puts 60 objects under data/ds/ in train/, val/ and misc/,
// six of them of several Bao groups.
func shardDataset(t *testing.T, s *s3test.Server) {
	t.Helper()
	s.CreateBucket(t, "data", true)
	s.CreateBucket(t, "store", true)
	objs := map[string][]byte{}
	for i := range 60 {
		n := 100 + 37*i
		if i%10 == 3 {
			n = 150_000 + 1000*i
		}
		objs[fmt.Sprintf("ds/%s/f%03d", []string{"train", "val", "misc"}[i%3], i)] = randomBytes(t, n)
	}
	putObjects(t, s, "data", objs)
}

// proc is a pinfs process started in the background.
type proc struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	out    bytes.Buffer
	errb   bytes.Buffer
	done   chan struct{}
	err    error
}

// startPinfs starts pinfs with env, bounded by two minutes; wait ends it.
func startPinfs(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	p := &proc{cmd: exec.CommandContext(ctx, pinfsBin, args...), cancel: cancel, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errb
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("pinfs %v: %v", args, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.cancel(); <-p.done })
	return p
}

// wait waits for the process (bounded by its context) and returns its result.
func (p *proc) wait(t *testing.T) result {
	t.Helper()
	<-p.done
	r := result{stdout: p.out.String(), stderr: p.errb.String()}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
	case errors.As(p.err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("pinfs %v: %v", p.cmd.Args, p.err)
	}
	return r
}

// mustShard checks that a shard run exited 0 and returns its counts:
// members, reused, read.
func mustShard(t *testing.T, r result, i, n int) (members, reused, read int) {
	t.Helper()
	m := shardStatsRE.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil || m[1] != strconv.Itoa(i) || m[2] != strconv.Itoa(n) {
		t.Fatalf("shard %d of %d: %v", i, n, r)
	}
	members, _ = strconv.Atoi(m[3])
	reused, _ = strconv.Atoi(m[4])
	read, _ = strconv.Atoi(m[5])
	return members, reused, read
}

// planFile is what the tests read of a plan.
type planFile struct {
	Shards []struct {
		Objects []struct {
			Key string `json:"key"`
		} `json:"objects"`
	} `json:"shards"`
}

func readPlan(t *testing.T, file string) planFile {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var pl planFile
	if err := json.Unmarshal(b, &pl); err != nil {
		t.Fatalf("plan %s: %v", file, err)
	}
	return pl
}

func TestPinShardEqualsWholePin(t *testing.T) {
	t.Parallel()
	s := s3test.Start(t)
	env := s.Env()
	shardDataset(t, s)
	st := "s3://store/sharded"
	plan := filepath.Join(t.TempDir(), "plan.json")

	start := time.Now()
	r := mustPinfs(t, env, "pin", "s3://data/ds/", "--store", st, "--plan", plan, "--shards", "3", "--purpose", "it", "--split", "dir:train,val")
	pd := r.lastLine()
	if !isDigest(pd) || !strings.Contains(r.stderr, "60 objects") || !strings.Contains(r.stderr, "in 3 shards") {
		t.Fatalf("plan: %v", r)
	}
	if len(readPlan(t, plan).Shards) != 3 {
		t.Fatalf("plan file %s has not 3 shards", plan)
	}
	// Shards 0 and 1 at once, one by the plan file, one by its digest.
	p0 := startPinfs(t, env, "pin", "--plan", plan, "--shard", "0", "--store", st)
	p1 := startPinfs(t, env, "pin", "--plan", pd, "--shard", "1", "--store", st, "--jobs", "2")
	members := 0
	for i, p := range []*proc{p0, p1} {
		m, reused, read := mustShard(t, p.wait(t), i, 3)
		if reused != 0 || read != m {
			t.Errorf("shard %d of a fresh store: %d members, %d reused, %d read", i, m, reused, read)
		}
		members += m
	}
	m, _, _ := mustShard(t, mustPinfs(t, env, "pin", "--plan", plan, "--shard", "2", "--store", st), 2, 3)
	if members += m; members != 60 {
		t.Errorf("the shards hashed %d members, want 60", members)
	}
	r = mustPinfs(t, env, "pin", "--plan", plan, "--merge", "--store", st)
	sharded := time.Since(start)
	md := r.lastLine()
	if !isDigest(md) || !strings.Contains(r.stderr, "merge: 60 members: 60 reused, 0 read; read 0 bytes of members") {
		t.Fatalf("merge: %v", r)
	}

	// A whole pin into another store: no digest cache to lean on.
	start = time.Now()
	wd := mustPinfs(t, env, "pin", "s3://data/ds/", "--store", "s3://store/whole", "--purpose", "it", "--split", "dir:train,val").lastLine()
	t.Logf("plan + 3 shards (two at once) + merge: %v; whole pin: %v", sharded, time.Since(start))
	if md != wd {
		t.Fatalf("sharded pin %s, whole pin %s", md, wd)
	}
	// And one in the same store that reads every member again.
	r = mustPinfs(t, env, "pin", "s3://data/ds/", "--store", st, "--purpose", "it", "--split", "dir:train,val", "--rehash")
	if r.lastLine() != md || !strings.Contains(r.stderr, "60 members: 0 reused, 60 read") {
		t.Fatalf("--rehash pin in the sharded store: %v; sharded %s", r, md)
	}
	// Other manifest flags give another digest: the plan carried them.
	if other := mustPinfs(t, env, "pin", "s3://data/ds/", "--store", "s3://store/whole", "--purpose", "it").lastLine(); other == md {
		t.Fatalf("a pin with another split rule has the sharded digest %s", md)
	}
	wantExit(t, env, 0, []string{"verify: OK", "members 60", "deep"}, "verify", md, "--store", st, "--deep")
}

func TestPinShardRerunAfterSIGKILL(t *testing.T) {
	t.Parallel()
	s := s3test.Start(t)
	s.CreateBucket(t, "data", true)
	s.CreateBucket(t, "store", true)
	// 1500 small objects and one big one: the big one fills shard 0 alone,
	// the small ones shard 1.
	objs := map[string][]byte{"big/zbig": randomBytes(t, 1<<20)}
	for i := range 1500 {
		objs[fmt.Sprintf("big/small/s%05d", i)] = []byte(fmt.Sprintf("small object %d\n", i))
	}
	putObjects(t, s, "data", objs)
	env := s.Env()
	st := "s3://store/crash"
	plan := filepath.Join(t.TempDir(), "plan.json")
	mustPinfs(t, env, "pin", "s3://data/big/", "--store", st, "--plan", plan, "--shards", "2")
	pl := readPlan(t, plan)
	if len(pl.Shards[0].Objects) != 1 || len(pl.Shards[1].Objects) != 1500 {
		t.Fatalf("plan: %d and %d objects, want 1 and 1500", len(pl.Shards[0].Objects), len(pl.Shards[1].Objects))
	}

	// Shard 1 through a proxy that stalls the GET of its 1301st object, so
	// that it is still running when its first checkpoint appears. A
	// checkpoint is a segment and then the head naming it: wait for the
	// head, or the kill may land between the two and leave nothing to reuse.
	px, err := faultproxy.New(s.Endpoint, faultproxy.Options{AccessKey: s.AccessKey, SecretKey: s.SecretKey, Region: s.Region})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	stalled := pl.Shards[1].Objects[1300].Key
	px.Inject(faultproxy.Rule{Method: "GET", Path: "/data/" + stalled, Fault: faultproxy.StallAfter(0, 0)})
	p := startPinfs(t, append(s.Env(), px.Env()...), "pin", "--plan", plan, "--shard", "1", "--store", st, "--jobs", "1")
	c := s.Client(t)
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("store"), Prefix: aws.String("crash/versions/heads/")})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Contents) > 0 {
			break
		}
		select {
		case <-p.done:
			t.Fatalf("shard 1 ended before its first checkpoint: %v", p.wait(t))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint of shard 1 within 90 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t); r.code == 0 {
		t.Fatalf("shard 1 was not killed: %v", r)
	}
	px.Clear()
	if out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("store"), Prefix: aws.String("crash/shards/")}); err != nil || len(out.Contents) != 0 {
		t.Fatalf("a killed shard left a partial table (or listing failed: %v)", err)
	}

	// The rerun completes, reusing what the killed run checkpointed.
	members, reused, read := mustShard(t, mustPinfs(t, env, "pin", "--plan", plan, "--shard", "1", "--store", st, "--jobs", "4"), 1, 2)
	if members != 1500 || reused == 0 || reused+read != 1500 {
		t.Fatalf("rerun of shard 1: %d members, %d reused, %d read; want some reused", members, reused, read)
	}
	t.Logf("rerun of shard 1 after SIGKILL: %d reused, %d read", reused, read)
	wantExit(t, env, 1, []string{"missing shard 0 of 2", "--shard 0"}, "pin", "--plan", plan, "--merge", "--store", st)
	mustShard(t, mustPinfs(t, env, "pin", "--plan", plan, "--shard", "0", "--store", st), 0, 2)
	md := mustPinfs(t, env, "pin", "--plan", plan, "--merge", "--store", st).lastLine()
	if wd := mustPinfs(t, env, "pin", "s3://data/big/", "--store", "s3://store/whole").lastLine(); wd != md {
		t.Fatalf("merge after a crashed shard: %s, whole pin %s", md, wd)
	}
}

func TestPinShardMergeRefusals(t *testing.T) {
	t.Parallel()
	s := s3test.Start(t)
	env := s.Env()
	shardDataset(t, s)
	st := "s3://store/refuse"
	plan := filepath.Join(t.TempDir(), "plan.json")
	pd := mustPinfs(t, env, "pin", "s3://data/ds/", "--store", st, "--plan", plan, "--shards", "3").lastLine()
	hex := strings.TrimPrefix(pd, "sha256:")
	for _, i := range []string{"0", "2"} {
		mustPinfs(t, env, "pin", "--plan", plan, "--shard", i, "--store", st)
	}
	wantExit(t, env, 2, []string{"--shard 3", "shards 0 to 2"}, "pin", "--plan", plan, "--shard", "3", "--store", st)

	// A missing shard, named with the command that makes it.
	wantExit(t, env, 1, []string{"missing shard 1 of 3", "pinfs pin --plan " + pd + " --shard 1"}, "pin", "--plan", plan, "--merge", "--store", st)
	mustPinfs(t, env, "pin", "--plan", pd, "--shard", "1", "--store", st)

	// An extra shard.
	stray := "refuse/shards/sha256/" + hex + "/3"
	s.Put(t, "store", stray, []byte("stray"))
	wantExit(t, env, 1, []string{"extra shard 3: plan " + pd + " has 3 shards"}, "pin", "--plan", plan, "--merge", "--store", st)
	if _, err := s.Client(t).DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String("store"), Key: aws.String(stray)}); err != nil {
		t.Fatal(err)
	}

	// A partial table that names an object outside its shard.
	key := "refuse/shards/sha256/" + hex + "/0"
	bucket, es, err := pinversions.Parse(s.Get(t, "store", key, ""))
	if err != nil {
		t.Fatal(err)
	}
	bad, err := pinversions.Encode(bucket, append(es, pinversions.Entry{Key: "ds/zzz", VersionID: "v1", Size: 1}))
	if err != nil {
		t.Fatal(err)
	}
	s.Put(t, "store", key, bad)
	wantExit(t, env, 1, []string{"shard 0: partial table does not cover the plan's shard: names ds/zzz, which is not in the shard"},
		"pin", "--plan", plan, "--merge", "--store", st)

	// Shard 1's table as shard 0's.
	s.Put(t, "store", key, s.Get(t, "store", "refuse/shards/sha256/"+hex+"/1", ""))
	wantExit(t, env, 1, []string{"shard 0: partial table does not cover"}, "pin", "--plan", plan, "--merge", "--store", st)

	// A rerun of shard 0 replaces the bad table; the merge then succeeds.
	mustPinfs(t, env, "pin", "--plan", plan, "--shard", "0", "--store", st)
	if d := mustPinfs(t, env, "pin", "--plan", plan, "--merge", "--store", st).lastLine(); !isDigest(d) {
		t.Fatalf("merge printed %q", d)
	}

	// An edited plan file is refused.
	b, err := os.ReadFile(plan)
	if err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(t.TempDir(), "edited.json")
	if err := os.WriteFile(edited, bytes.Replace(b, []byte(`"size":100,`), []byte(`"size":101,`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	wantExit(t, env, 1, []string{"add up"}, "pin", "--plan", edited, "--merge", "--store", st)
}

func TestPinShardUsageErrors(t *testing.T) {
	t.Parallel()
	st := t.TempDir()
	plan := filepath.Join(t.TempDir(), "plan.json")
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"take the SOURCE from --plan", []string{"s3://data/ds/", "--plan", plan, "--shard", "0"}},
		{"take the SOURCE from --plan", []string{"s3://data/ds/", "--plan", plan, "--merge"}},
		{"three phases", []string{"--plan", plan, "--shard", "0", "--merge"}},
		{"need --plan", []string{"s3://data/ds/", "--shards", "2"}},
		{"--plan needs", []string{"s3://data/ds/", "--plan", plan}},
		{"want 1 to 10000", []string{"s3://data/ds/", "--plan", plan, "--shards", "0"}},
		{"want 1 to 10000", []string{"s3://data/ds/", "--plan", plan, "--shards", "10001"}},
		{"--purpose: manifest flags", []string{"--plan", plan, "--merge", "--purpose", "x"}},
		{"--split: manifest flags", []string{"--plan", plan, "--shard", "1", "--split", "none"}},
		{"--shards: want exactly one SOURCE", []string{"--plan", plan, "--shards", "2"}},
	} {
		wantExit(t, nil, 2, []string{tc.want}, append([]string{"pin", "--store", st}, tc.args...)...)
	}
	if _, err := os.Stat(plan); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused command wrote the plan: %v", err)
	}
}
